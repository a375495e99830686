"""Hand-written HLO modules, each exercising attribute kinds of the text grammar.

Every module here is valid for XLA's own parser (jaxlib's `hlo_module_from_text`), so tests can
check that our reading equals XLA's reading, and that our printing reads back equal.
"""
from __future__ import annotations

ADD = """
%add (sa: f32[], sb: f32[]) -> f32[] {
  %sa = f32[] parameter(0)
  %sb = f32[] parameter(1)
  ROOT %sc = f32[] add(f32[] %sa, f32[] %sb)
}
"""

SNIPPETS: dict[str, str] = {
    "custom_call_literal": """HloModule cclit
ENTRY e {
  x = f32[4] parameter(0)
  a = f32[4] custom-call(x), custom_call_target="foo", literal=s32[] 1
  ROOT b = f32[4] custom-call(a), custom_call_target="bar", literal=f32[2]{0} {1.5, -2}
}""",
    # XLA's parser keeps a signature that lists more parameters than the entry has (a warning here)
    "entry_layout_with_more_parameters": """HloModule sig, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] negate(x)
}""",
    "module_name_with_colon": """HloModule named:
ENTRY e {
  x = f32[4] parameter(0)
  ROOT a = f32[4] negate(x)
}""",
    "dot_precision_algorithm": """HloModule dot
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[2,4,5]{1,2,0} parameter(1)
  ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={high,highest}
}""",
    "dot_algorithm": """HloModule dotalg
ENTRY e {
  a = f32[3,4] parameter(0)
  b = f32[4,5] parameter(1)
  ROOT d = f32[3,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32
}""",
    "convolution": """HloModule conv
ENTRY e {
  x = f32[1,8,8,3] parameter(0)
  k = f32[3,3,3,6] parameter(1)
  ROOT c = f32[1,4,7,6] convolution(x, k), window={size=3x3 stride=2x1 pad=1_1x0_0 lhs_dilate=1x1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f, feature_group_count=1, operand_precision={default,high}
}""",
    "convolution_groups_reversal": """HloModule convg
ENTRY e {
  x = f32[2,4,5] parameter(0)
  k = f32[2,3,4] parameter(1)
  ROOT c = f32[2,4,3] convolution(x, k), window={size=3 rhs_reversal=1}, dim_labels=bf0_io0->bf0, feature_group_count=2
}""",
    "reduce_window_select_scatter": """HloModule rw
%max (ma: f32[], mb: f32[]) -> f32[] {
  %ma = f32[] parameter(0)
  %mb = f32[] parameter(1)
  ROOT %m = f32[] maximum(%ma, %mb)
}
%ge (ga: f32[], gb: f32[]) -> pred[] {
  %ga = f32[] parameter(0)
  %gb = f32[] parameter(1)
  ROOT %g = pred[] compare(%ga, %gb), direction=GE
}
""" + ADD + """
ENTRY e {
  x = f32[4,6] parameter(0)
  z = f32[] constant(-inf)
  r = f32[2,3] reduce-window(x, z), window={size=2x2 stride=2x2}, to_apply=%max
  s = f32[2,3] parameter(1)
  zero = f32[] constant(0)
  ROOT sas = f32[4,6] select-and-scatter(x, s, zero), window={size=2x2 stride=2x2}, select=%ge, scatter=%add
}""",
    "slice_pad_dynamic": """HloModule slicing
ENTRY e {
  x = f32[8,9] parameter(0)
  s = f32[3,4] slice(x), slice={[1:4], [0:8:2]}
  z = f32[] constant(0)
  p = f32[6,12] pad(s, z), padding=1_2x0_1_2
  i = s32[] parameter(1)
  d = f32[2,2] dynamic-slice(p, i, i), dynamic_slice_sizes={2,2}
  u = f32[6,12] dynamic-update-slice(p, d, i, i)
  ROOT t = (f32[2,2], f32[6,12]) tuple(d, u)
}""",
    "gather_scatter": """HloModule gs
""" + ADD + """
ENTRY e {
  x = f32[5,3] parameter(0)
  i = s32[2,1] parameter(1)
  g = f32[2,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}, indices_are_sorted=true
  ROOT s = f32[5,3] scatter(x, i, g), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, indices_are_sorted=true, unique_indices=true, to_apply=%add
}""",
    "batched_gather": """HloModule bg
ENTRY e {
  x = f32[2,5,3] parameter(0)
  i = s32[2,4,1] parameter(1)
  ROOT g = f32[2,4,3] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,3}
}""",
    "compare_sort_types": """HloModule cmp
%lt (la: f32[], lb: f32[], lc: s32[], ld: s32[]) -> pred[] {
  %la = f32[] parameter(0)
  %lb = f32[] parameter(1)
  %lc = s32[] parameter(2)
  %ld = s32[] parameter(3)
  ROOT %l = pred[] compare(%la, %lb), direction=LT, type=TOTALORDER
}
ENTRY e {
  x = f32[7] parameter(0)
  y = s32[7] parameter(1)
  u = u32[7] convert(y)
  c1 = pred[7] compare(y, y), direction=NE
  c2 = pred[7] compare(u, u), direction=GE
  c3 = pred[7] compare(x, x), direction=EQ, type=TOTALORDER
  s = (f32[7], s32[7]) sort(x, y), dimensions={0}, is_stable=true, to_apply=%lt
  ROOT t = (pred[7], pred[7], pred[7], (f32[7], s32[7])) tuple(c1, c2, c3, s)
}""",
    "while_conditional_call": """HloModule control
%cond (ct: (s32[], f32[2])) -> pred[] {
  %ct = (s32[], f32[2]) parameter(0)
  %ci = s32[] get-tuple-element(%ct), index=0
  %cn = s32[] constant(10)
  ROOT %lt = pred[] compare(%ci, %cn), direction=LT
}
%body (bt: (s32[], f32[2])) -> (s32[], f32[2]) {
  %bt = (s32[], f32[2]) parameter(0)
  %bi = s32[] get-tuple-element(%bt), index=0
  %one = s32[] constant(1)
  %j = s32[] add(%bi, %one)
  %bx = f32[2] get-tuple-element(%bt), index=1
  ROOT %r = (s32[], f32[2]) tuple(%j, %bx)
}
%neg (nx: f32[2]) -> f32[2] {
  %nx = f32[2] parameter(0)
  ROOT %nn = f32[2] negate(%nx)
}
%id (ix: f32[2]) -> f32[2] {
  ROOT %ix = f32[2] parameter(0)
}
ENTRY e {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  w = (s32[], f32[2]) while(init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"10"}}
  p = pred[] parameter(1)
  c = f32[2] conditional(p, x, x), true_computation=%neg, false_computation=%id
  b = s32[] parameter(2)
  s = f32[2] conditional(b, x, x, x), branch_computations={%id, %neg, %id}
  k = f32[2] call(s), to_apply=%neg
  ROOT t = ((s32[], f32[2]), f32[2], f32[2]) tuple(w, c, k)
}""",
    "custom_call_everything": """HloModule cc
ENTRY e {
  x = f32[4,4] parameter(0)
  y = s32[2] parameter(1)
  a = f32[4,4] custom-call(x, y), custom_call_target="AwsNeuronCustomNativeKernel", operand_layout_constraints={f32[4,4]{0,1}, s32[2]{0}}, custom_call_has_side_effect=true, output_to_operand_aliasing={{}: (0, {})}, schedule=SCHEDULE_LATEST, api_version=API_VERSION_STATUS_RETURNING, backend_config="eyJrIjogMX0=\\n\\"q\\"\\001"
  b = (f32[4,4], s32[]) custom-call(a), custom_call_target="foo", api_version=API_VERSION_TYPED_FFI, backend_config={kernel = 7 : i64, name = "x{y}"}
  ROOT t = ((f32[4,4], s32[])) tuple(b)
}""",
    "constants_all_types": """HloModule consts
ENTRY e {
  c0 = pred[3] constant({true, false, true})
  c1 = s8[2] constant({-128, 127})
  c2 = u8[2] constant({0, 255})
  c3 = s16[2] constant({-32768, 32767})
  c4 = u16[2] constant({0, 65535})
  c5 = s32[2,2] constant({ { -2147483648, 2147483647 }, { 0, 1 } })
  c6 = u32[2] constant({0, 4294967295})
  c7 = s64[2] constant({-9223372036854775808, 9223372036854775807})
  c8 = u64[2] constant({0, 18446744073709551615})
  c9 = f16[4] constant({1.5, inf, -inf, nan})
  c10 = bf16[4] constant({1.5, -0, 3.38953139e+38, -nan})
  c11 = f32[6] constant({1.5, inf, -inf, nan, 1e-45, -3.40282347e+38})
  c12 = f64[3] constant({0.1, 1e+300, -nan})
  c13 = c64[2] constant({(1, 2), (-0.5, inf)})
  c14 = c128[1] constant({(1e-300, -2)})
  c15 = f8e5m2[3] constant({1.5, -inf, 57344})
  c16 = f8e4m3fn[3] constant({1.5, -448, 0.015625})
  c17 = f8e4m3b11fnuz[2] constant({1, -0.5})
  c18 = f8e5m2fnuz[2] constant({1, -0.5})
  c19 = f8e4m3fnuz[2] constant({1, -0.5})
  c20 = s4[3] constant({-8, 7, 0})
  c21 = u4[3] constant({0, 15, 3})
  c22 = f32[2,3]{0,1} constant({ { 1, 2, 3 }, { 4, 5, 6 } })
  c23 = f32[0] constant({})
  c24 = f32[] constant(42)
  c25 = (f32[2], s32[]) constant(({1, 2}, 3))
  c26 = f32[2,0] constant({ {  }, {  } })
  c27 = f8e4m3[2] constant({1, -0.5})
  c28 = f8e3m4[2] constant({1, -0.5})
  ROOT t = (pred[3], s8[2], u8[2], f16[4], bf16[4], f32[6], f64[3], c64[2], c128[1], f8e5m2[3], f8e4m3fn[3], s4[3], u4[3], f32[2,3]{0,1}, (f32[2], s32[])) tuple(c0, c1, c2, c9, c10, c11, c12, c13, c14, c15, c16, c20, c21, c22, c25)
}""",
    "layouts_dynamic_memory_space": """HloModule layouts, entry_computation_layout={(f32[8,128]{1,0:T(8,128)S(1)}, s32[<=4,3]{0,1})->f32[8,128]{0,1:T(2,128)(2,1)E(32)}}
ENTRY e {
  a = f32[8,128]{1,0:T(8,128)S(1)} parameter(0)
  b = s32[<=4,3]{0,1} parameter(1)
  ROOT c = f32[8,128]{0,1:T(2,128)(2,1)E(32)} copy(a)
}""",
    "sharding_metadata_frontend": """HloModule shard, frontend_attributes={_xla_module="m", key="v w"}
ENTRY e {
  a = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}, metadata={op_type="Param" op_name="a/b" source_file="/x/y.py" source_line=12 source_end_line=13 source_column=4 source_end_column=9}
  b = f32[8,4] copy(a), sharding={devices=[2,2]<=[4] last_tile_dim_replicate}, frontend_attributes={_xla_stream_annotation="1", other="2"}
  c = f32[8,4] copy(b), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual}}
  d = f32[8,4] copy(c), sharding={maximal device=1}
  e = f32[8,4] copy(d), sharding={replicated}
  f = f32[8,4] copy(e), sharding={manual}
  ROOT t = (f32[8,4], f32[8,4]) tuple(e, f), sharding={{replicated}, {maximal device=0}}
}""",
    "collectives": """HloModule coll, replica_count=4
""" + ADD + """
ENTRY e {
  x = f32[8] parameter(0)
  ar = f32[8] all-reduce(x), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=%add
  ag = f32[16] all-gather(x), channel_id=2, replica_groups=[2,2]<=[4], dimensions={0}
  rs = f32[4] reduce-scatter(x), replica_groups={{0,1},{2,3}}, dimensions={0}, to_apply=%add
  a2a = f32[8] all-to-all(x), replica_groups={{0,1,2,3}}, dimensions={0}
  cp = f32[8] collective-permute(x), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  r = u32[] replica-id()
  ROOT t = (f32[8], f32[16], f32[4], f32[8], f32[8], u32[]) tuple(ar, ag, rs, a2a, cp, r)
}""",
    "rng_fft_precision_misc": """HloModule misc
ENTRY e {
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[3] rng(lo, hi), distribution=rng_uniform
  st = u64[2] parameter(0)
  bg = (u64[2], u32[4]) rng-bit-generator(st), algorithm=rng_philox
  c = c64[8] parameter(1)
  f = c64[8] fft(c), fft_type=FFT, fft_length={8}
  rf = f32[8] fft(c), fft_type=IRFFT, fft_length={14}
  x = f32[3] parameter(2)
  rp = f32[3] reduce-precision(x), exponent_bits=5, mantissa_bits=10
  io = s32[4,3] iota(), iota_dimension=1
  y = f32[3,4] parameter(3)
  tk = (f32[3,2], s32[3,2]) topk(f32[3,4] y), k=2, largest=true
  cl = f32[3] clamp(lo, x, hi)
  ROOT t = (f32[3], (u64[2], u32[4]), c64[8], f32[8], f32[3], s32[4,3], (f32[3,2], s32[3,2]), f32[3]) tuple(r, bg, f, rf, rp, io, tk, cl)
}""",
    "batchnorm_triangular_cholesky": """HloModule linalg
ENTRY e {
  x = f32[2,3,4] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  bn = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
  a = f32[4,4] parameter(3)
  b = f32[4,2] parameter(4)
  ts = f32[4,2] triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=true, transpose_a=TRANSPOSE
  ch = f32[4,4] cholesky(a), lower=true
  ROOT t = ((f32[2,3,4], f32[3], f32[3]), f32[4,2], f32[4,4]) tuple(bn, ts, ch)
}""",
    "fusion_scheduled_control": """HloModule sched, is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}
%fused (fp: f32[4]) -> f32[4] {
  %fp = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%fp)
}
ENTRY %e (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %b = f32[4]{0} copy(%x)
  %a = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused
  ROOT %r = f32[4]{0} add(%a, %b), control-predecessors={%b}
}""",
    "alias_donor_infeed_outfeed": """HloModule io, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, buffer_donor={ (2, {}) }
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  c = f32[4] parameter(2)
  tok = token[] after-all()
  feed = ((f32[4], s32[]), token[]) infeed(tok), infeed_config="abc"
  out = token[] outfeed(a, tok), outfeed_shape=f32[4]{0}, outfeed_config="xyz"
  ROOT t = (f32[4], f32[4]) tuple(b, c)
}""",
    "names_without_percent_comments": """HloModule plain // a comment
/* block
   comment */
ENTRY main {
  p0 = bf16[2,2]{1,0} parameter(0)
  p1 = f16[2,2] parameter(1)
  cv = bf16[2,2] convert(p1)
  m = bf16[2,2] multiply(p0, cv)
  bc = s16[2,2] bitcast-convert(m)
  tr = bf16[2,2]{0,1} transpose(m), dimensions={1,0}
  rs = bf16[4] reshape(tr)
  bcast = bf16[3,4] broadcast(rs), dimensions={1}
  rev = bf16[3,4] reverse(bcast), dimensions={0,1}
  cat = bf16[6,4] concatenate(rev, rev), dimensions={0}
  ROOT t = (s16[2,2], bf16[6,4]) tuple(bc, cat)
}""",
    "async_wrapped": """HloModule asyncm
%wrapped (wp: f32[4]) -> f32[4] {
  %wp = f32[4]{0} parameter(0)
  ROOT %wn = f32[4]{0} negate(%wp)
}, execution_thread="aux"
ENTRY %e (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %st = ((f32[4]{0}), f32[4]{0}, s32[]) async-start(%x), async_execution_thread="aux", calls=%wrapped
  %up = ((f32[4]{0}), f32[4]{0}, s32[]) async-update(%st)
  ROOT %dn = f32[4]{0} async-done(%up)
}""",
    "send_recv_copy_start_accuracy": """HloModule sr
ENTRY %e (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), parameter_replication={true}
  %tok = token[] after-all()
  %send = (f32[4]{0}, u32[], token[]) send(%x, %tok), channel_id=5, is_host_transfer=true, frontend_attributes={_xla_host_transfer_rendezvous="r"}
  %sd = token[] send-done(%send), channel_id=5, is_host_transfer=true
  %recv = (f32[4]{0}, u32[], token[]) recv(%tok), channel_id=6, is_host_transfer=true
  %rd = (f32[4]{0}, token[]) recv-done(%recv), channel_id=6, is_host_transfer=true
  %cs = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(%x), cross_program_prefetch_index=0
  %cd = f32[4]{0} copy-done(%cs)
  %st = u64[2]{0} rng-get-and-update-state(), delta=8
  %ex = f32[4]{0} exponential(%cd), result_accuracy={mode=highest}
  %tn = f32[4]{0} tanh(%ex), result_accuracy={tolerance={atol=0.5,rtol=0,ulps=2}}
  %tp = (f32[4]{0}, token[]) tuple(%tn, %sd)
  %ob = (f32[4]{0}, token[]) opt-barrier(%tp)
  ROOT %o = f32[4]{0} get-tuple-element(%ob), index=0
}""",
    "collective_start_done": """HloModule ars, replica_count=2
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
ENTRY %e {
  %x = f32[4]{0} parameter(0)
  %s = f32[4]{0} all-reduce-start(%x), replica_groups={{0,1}}, to_apply=%sum
  %d = f32[4]{0} all-reduce-done(%s)
  %cps = (f32[4]{0}, f32[4]{0}, u32[], u32[]) collective-permute-start(%d), source_target_pairs={{0,1},{1,0}}
  %cpd = f32[4]{0} collective-permute-done(%cps)
  %ags = (f32[4]{0}, f32[8]{0}) all-gather-start(%cpd), replica_groups={{0,1}}, dimensions={0}
  %agd = f32[8]{0} all-gather-done(%ags)
  %pid = u32[] partition-id()
  %cb = f32[4]{0} collective-broadcast(%x), replica_groups={{0,1}}
  ROOT %t = (f32[8]{0}, u32[], f32[4]{0}) tuple(%agd, %pid, %cb)
}""",
    "dynamic_sizes_map_domain": """HloModule misc2, entry_computation_layout={(f32[<=8]{0}, s32[])->f32[<=8]{0}}
%mx (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] maximum(%a, %b)
}
ENTRY %e (x: f32[<=8], n: s32[]) -> f32[<=8] {
  %x = f32[<=8]{0} parameter(0)
  %n = s32[] parameter(1)
  %gds = s32[] get-dimension-size(%x), dimensions={0}
  %sds = f32[<=8]{0} set-dimension-size(%x, %n), dimensions={0}
  %m = f32[<=8]{0} map(%sds, %sds), dimensions={0}, to_apply=%mx
  %dom = f32[<=8]{0} domain(%m), domain={kind="sharding", entry={maximal device=0}, exit={replicated}}
  %cc = f32[<=8]{0} custom-call(%dom), custom_call_target="x", sharding={manual}, metadata={op_type="t" op_name="n" deduplicated_name="d" scheduling_name="s"}
  ROOT %ad = f32[<=8]{0} add-dependency(%cc, %n)
}""",
    "sharding_forms": """HloModule shardings
ENTRY e {
  a = f32[4,4] parameter(0), sharding={replicated metadata={op_name="a"}}
  b = f32[4,4] copy(a), sharding={replicated metadata={{op_name="a"}, {op_type="b"}}}
  c = f32[4,4] copy(b), sharding={devices=[2,1]0,1 shard_as 2}
  d = f32[4,4] copy(c), sharding={unknown shard_like 1}
  e = f32[4,4] copy(d), sharding={devices=[2,2]<=[4] last_tile_dims={manual, replicated}}
  ROOT t = (f32[4,4], f32[4,4]) tuple(d, e), sharding={{replicated}, {manual}}
}""",
    "async_shorthand": """HloModule m
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
ENTRY e {
  x = f32[4,4] parameter(0)
  y = f32[4,4] parameter(1)
  st = ((f32[4,4], f32[4,4]), f32[4,4], s32[]) add-start(x, y), metadata={op_name="m"}, frontend_attributes={a="b"}, backend_config="cfg"
  dn = f32[4,4] add-done(st)
  z = f32[] constant(0)
  rs = ((f32[4,4], f32[]), f32[4], s32[]) reduce-start(x, z), dimensions={0}, to_apply=%sum, async_execution_thread="t"
  ru = ((f32[4,4], f32[]), f32[4], s32[]) reduce-update(rs)
  rd = f32[4] reduce-done(ru)
  cs = ((f32[4,4]), f32[4,4], s32[]) custom-call-start(dn), custom_call_target="foo", backend_config="abc"
  cd = f32[4,4] custom-call-done(cs)
  ROOT t = (f32[4,4], f32[4]) tuple(cd, rd)
}""",
    "generic_attribute_order": """HloModule generic
ENTRY e {
  a = (f32[2], f32[2]) parameter(0), origin={({"a"}, {"b" {0}})}, parameter_replication={true,false}
  x = f32[2] parameter(1), origin={{"x" {1}}}
  s = f32[2] exponential(x), backend_config="x", metadata={op_name="n"}, control-predecessors={a}, statistics={visualizing_index=1,stat-1=33.5,stat-2=0.25}, origin={[synthetic_call]}, frontend_attributes={k="v"}, sharding={replicated}, result_accuracy={mode=highest}
  ROOT t = ((f32[2], f32[2]), f32[2]) tuple(a, s)
}""",
    "nested_instructions": """HloModule nested
ENTRY e {
  x = f32[2] parameter(0)
  y = f32[2] add(f32[2] negate(f32[2] negate(x)), x)
  ROOT r = f32[2] add(f32[2] broadcast(f32[] constant(1)), y), metadata={op_name="a"}
}""",
    # result shapes left out: XLA's parser infers them (hlo/text/infer.py)
    "inferred_elementwise": """HloModule inferred_ew
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  q = f32[2,3] parameter(1)
  z = c64[2,3] parameter(2)
  n = negate(p)
  a = add(p, q)
  c = compare(p, q), direction=LT
  s = select(c, p, q)
  k = clamp(p, q, p)
  f = is-finite(p)
  m = abs(z)
  r = real(z)
  x = complex(p, q)
  e = exponential(q), result_accuracy={mode=highest}
  ROOT t = tuple(n, a, c, s, k, f, m, r, x, e)
}""",
    "inferred_shape_ops": """HloModule inferred_shape
ENTRY e {
  p = f32[2,3,4]{1,2,0} parameter(0)
  q = f32[2,5,4] parameter(1)
  s = f32[] parameter(2)
  t = transpose(p), dimensions={2,0,1}
  v = reverse(p), dimensions={0}
  u = (f32[2,3,4], f32[]) tuple(p, s)
  g = get-tuple-element(u), index=0
  c = concatenate(p, q), dimensions={1}
  d = pad(p, s), padding=1_2x0_0_1x3_0
  w = dot(p, q), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  n = get-dimension-size(p), dimensions={1}
  k = topk(p), k=2
  a = after-all()
  ROOT r = tuple(t, v, g, c, d, w, n, k, a)
}""",
    "signature_with_more_parameters": """HloModule sig_more

ENTRY %e (a: f32[1,8], b: f32[8], c: f32[8]) -> s32[] {
  %a = f32[1,8]{1,0} parameter(0)
  %n = f32[1,8]{1,0} negate(f32[1,8]{1,0} %a)
  ROOT %g = s32[] get-dimension-size(f32[1,8]{1,0} %n), dimensions={1}
}
""",
    "inferred_convolution": """HloModule inferred_conv
ENTRY e {
  x = f32[2,9,11,3] parameter(0)
  k = f32[3,4,3,5] parameter(1)
  y = f32[4,6,7] parameter(2)
  w = f32[3,2,3] parameter(3)
  g = f32[6,5,5,8] parameter(4)
  h = f32[2,2,8,3] parameter(5)
  a = convolution(x, k), window={size=3x4 stride=2x3 pad=1_2x0_1 lhs_dilate=2x1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f
  b = convolution(y, w), window={size=3 stride=3}, dim_labels=bf0_oi0->0bf, feature_group_count=3
  c = convolution(g, h), window={size=2x2 pad=0_1x1_0}, dim_labels=b01f_01io->f01b, batch_group_count=3
  ROOT t = (f32[2,9,2,5], f32[2,4,3], f32[3,5,5,2]) tuple(a, b, c)
}
""",
    "inferred_with_computations": """HloModule inferred_comps
add {
  a0 = f32[] parameter(0)
  b0 = f32[] parameter(1)
  ROOT c0 = add(a0, b0)
}
add2 {
  a1 = f32[] parameter(0)
  b1 = s32[] parameter(1)
  c1 = f32[] parameter(2)
  d1 = s32[] parameter(3)
  e1 = add(a1, c1)
  f1 = add(b1, d1)
  ROOT t1 = tuple(e1, f1)
}
lt {
  a2 = f32[] parameter(0)
  b2 = f32[] parameter(1)
  ROOT c2 = compare(a2, b2), direction=LT
}
cnd {
  a3 = f32[] parameter(0)
  ROOT c3 = pred[] constant(false)
}
neg {
  a4 = f32[] parameter(0)
  ROOT c4 = negate(a4)
}
ENTRY e {
  p = f32[2,3] parameter(0)
  i = s32[2,3] parameter(1)
  s = f32[] parameter(2)
  z = s32[] parameter(3)
  b = pred[] parameter(4)
  r = reduce(p, s), dimensions={1}, to_apply=add
  r2 = reduce(p, i, s, z), dimensions={0,1}, to_apply=add2
  m = map(p, p), dimensions={0,1}, to_apply=add
  c = call(s, s), to_apply=add
  o = sort(p), dimensions={1}, to_apply=lt
  w = while(s), condition=cnd, body=neg
  k = conditional(b, s, s), true_computation=neg, false_computation=neg
  rw = reduce-window(p, s), window={size=2x2 stride=1x2 pad=0_1x1_1 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=add
  ROOT t = tuple(r, r2, m, c, o, w, k, rw)
}""",
    "buffer_type": """HloModule buffers
ENTRY e {
  p = b(f32[2,3]) parameter(0)
  ROOT c = b(f32[2,3]) copy(p)
}""",
    "scan_attributes": """HloModule scans
step {
  x = f32[] parameter(0)
  c = f32[] parameter(1)
  s = f32[] add(x, c)
  ROOT t = (f32[], f32[]) tuple(s, s)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] parameter(1)
  a = (f32[4], f32[]) scan(p, z), dimensions={0}, num_carries=1, is_reverse=true, is_associative=true, to_apply=step
  b = (f32[4], f32[]) scan(p, z), dimensions={0}, num_carries=1, is_associative=false, to_apply=step
  ROOT r = ((f32[4], f32[]), (f32[4], f32[])) tuple(a, b)
}""",
    # names repeated across computations: XLA's module makes them unique (add.1 twice -> add.0)
    "names_made_unique_across_computations": """HloModule dupnames
f {
  add.1 = f32[] parameter(0)
  a = f32[] parameter(1)
  ROOT x.5 = f32[] add(add.1, a)
}
g {
  add.1 = f32[] parameter(0)
  a = f32[] parameter(1)
  a.1 = f32[] negate(a)
  ROOT x.5 = f32[] add(add.1, a.1)
}
ENTRY e {
  a = f32[] parameter(0)
  add = f32[] add(a, a)
  c = f32[] call(a, add), to_apply=f
  ROOT d = f32[] call(c, a), to_apply=g
}""",
}
