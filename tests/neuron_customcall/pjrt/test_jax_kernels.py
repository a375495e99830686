"""NKI and C++ kernels inside a plain `jax.jit` on the neuron device: the seed guide's JAX program
as the document prints it, and a 20-step MLP training loop with an NKI custom op against the same
model with the plain JAX op on XLA:CPU."""
from __future__ import annotations

from tests.neuron_customcall.pjrt._proc import run_json

NKI_TENSOR_ADD = """
from neuron_customcall import nki
from neuron_customcall.nki import language as nl

@nki.jit
def nki_tensor_add_kernel_(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    offset_i_x = nl.program_id(0) * 128
    offset_i_y = nl.program_id(1) * 512
    ix = offset_i_x + nl.arange(128)[:, None]
    iy = offset_i_y + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile
    nl.store(c_output[ix, iy], value=c_tile)
    return c_output

def nki_tensor_add(a_input, b_input):
    grid_x = a_input.shape[0] // 128
    grid_y = a_input.shape[1] // 512
    return nki_tensor_add_kernel_[grid_x, grid_y](a_input, b_input)
"""


def test_seed_guide_jax_program():
    got = run_json(NKI_TENSOR_ADD + """
@jax.jit
def jax_customop_tutorial(a, b):
   c = nki_tensor_add(a, b) # calling a NKI kernel, instead of the built-in jax op
   out = a * b * c
   return out

seed = jax.random.PRNGKey(0)
seed_a, seed_b = jax.random.split(seed)
a = jax.random.normal(seed_a, (256, 1024), dtype=jnp.float32)
b = jax.random.normal(seed_b, (256, 1024), dtype=jnp.float32)
print(jax_customop_tutorial(a, b))

hlo = (jax.jit(jax_customop_tutorial)
   .lower(a, b)
   .compile()
   .runtime_executable()
   .hlo_modules()[0].to_string()
)

@jax.custom_vjp
def nki_add_func(a, b):
   return nki_tensor_add(a, b)

def f_forward(a, b):
   # operator output and residual (same as input here)
   return nki_add_func(a, b), (a, b)

def f_backward(res, grad):
   # gradients for a and b
   return grad, grad

nki_add_func.defvjp(f_forward, f_backward) # line 11

@jax.jit
def jax_customop_tutorial_and_grad(a, b):
   out = nki_add_func(a, b) * a * b  # the guide writes "* x * y": names it never defines

   # use the same dummy loss function (output sum) as PyTorch example above
   grad = jax.grad(lambda x, y: (nki_add_func(x, y) * x * y).sum(), argnums=(0, 1))(a, b)
   return out, *grad

c, grad_a, grad_b = jax_customop_tutorial_and_grad(a, b)
ac, bc = np.asarray(a, np.float64), np.asarray(b, np.float64)
out = jax_customop_tutorial(a, b)
report(device=repr(next(iter(out.devices()))),
       err=float(np.max(np.abs(np.asarray(out) - ac * bc * (ac + bc)))),
       grad_err=float(np.max(np.abs(np.asarray(grad_a) - (bc * (ac + bc) + ac * bc)))),
       c_err=float(np.max(np.abs(np.asarray(c) - np.asarray(out)))),
       custom_call=hlo.count("AwsNeuronCustomNativeKernel"))
""")
    assert got["device"] == "NeuronDevice(id=0)"
    assert got["err"] < 1e-3 and got["grad_err"] < 1e-3 and got["c_err"] < 1e-4  # (c*a)*b against (a*b)*c
    assert got["custom_call"] == 1  # the optimized program read back holds the kernel's custom-call


NKI_ADD = """
@jax.custom_vjp
def nki_add(a, b):
    return nki_tensor_add(a, b)
nki_add.defvjp(lambda a, b: (nki_add(a, b), None), lambda _, g: (g, g))
"""

#: 20 SGD steps of an MLP whose hidden layer is relu(add(x @ w1, b1)): `neuron_ops` and `cpu_ops`
#: name (add, relu) for the neuron device and for the XLA:CPU reference, named explicitly.
TRAINING_LOOP = """
def make_step(add, relu):
    def loss_fn(params, x, y):
        w1, b1, w2 = params
        h = relu(add(x @ w1, jnp.broadcast_to(b1, (x.shape[0], b1.shape[0]))))
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w2) * y, axis=1))
    @jax.jit
    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return [p - 0.1 * g for p, g in zip(params, grads)], loss
    return step

rng = np.random.default_rng(0)
params0 = [rng.standard_normal((64, 512)).astype(np.float32) * 0.1, np.zeros(512, np.float32),
           rng.standard_normal((512, 10)).astype(np.float32) * 0.1]
batches = [(rng.standard_normal((128, 64)).astype(np.float32),
            np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]) for _ in range(20)]
neuron_step, cpu_step = make_step(*neuron_ops), make_step(*cpu_ops)
text = neuron_step.lower(params0, *batches[0]).as_text()
p, q = params0, jax.device_put(params0, CPU)
losses, ref_losses = [], []
for x, y in batches:
    p, loss = neuron_step(p, x, y)
    q, ref = cpu_step(q, *jax.device_put((x, y), CPU))
    losses.append(float(loss)); ref_losses.append(float(ref))
report(losses=losses, ref=ref_losses, devices=sorted({repr(d) for a in p for d in a.devices()}),
       ref_devices=sorted({repr(d) for a in q for d in a.devices()}), calls=text.count("AwsNeuronCustomNativeKernel"),
       param_err=max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(p, q)))
"""


def _check_training(got: dict, calls: int) -> None:
    assert got["devices"] == ["NeuronDevice(id=0)"] and got["ref_devices"] == ["CpuDevice(id=0)"]
    assert got["calls"] == calls  # the kernels' custom-calls in the one step program
    assert got["losses"][-1] < got["losses"][0]
    for mine, ref in zip(got["losses"], got["ref"]):
        assert abs(mine - ref) <= 1e-4 * max(1.0, abs(ref)), (got["losses"], got["ref"])
    assert got["param_err"] < 1e-4


def test_mlp_training_with_an_nki_op_matches_xla_cpu():
    got = run_json(NKI_TENSOR_ADD + NKI_ADD + """
neuron_ops, cpu_ops = (nki_add, jax.nn.relu), (jnp.add, jax.nn.relu)
""" + TRAINING_LOOP)
    _check_training(got, calls=1)


def test_mlp_training_with_a_cpp_and_an_nki_op_matches_xla_cpu():
    """The hidden layer's bias add is the NKI kernel and its ReLU the training tutorial's C++ op
    (forward and backward, a custom_vjp): three custom-calls in the one step program. The
    reference is the same model with jnp.add and jax.nn.relu on XLA:CPU."""
    got = run_json(NKI_TENSOR_ADD + NKI_ADD + """
sys.path.insert(0, "examples/mlp_training")
import relu_ops
from neuron_customcall.jax import cpp_call
relu_ops.build()

@jax.custom_vjp
def cpp_relu(x):
    return cpp_call("my_ops::relu_forward", x)
cpp_relu.defvjp(lambda x: (cpp_relu(x), x), lambda x, g: (cpp_call("my_ops::relu_backward", g, x),))
neuron_ops, cpu_ops = (nki_add, cpp_relu), (jnp.add, jax.nn.relu)
""" + TRAINING_LOOP)
    _check_training(got, calls=3)
