// Everything a custom-op source may include from the device runtime, in one header that the build
// precompiles once (per compiler and flags) and force-includes into every source: parsing the
// tensor library is most of a small kernel's compile time.

#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"
#include "torchneuron/register.h"
