#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// ReLU through streaming accessors: sequential reads and writes cached in TCM.
torch::Tensor relu_stream(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::empty(t_in.sizes(), torch::kFloat);
    auto reader = t_in.read_stream_accessor<float>();
    auto writer = t_out.write_stream_accessor<float>();
    for (size_t i = 0; i < num_elem; i++) {
        float v = reader.read();
        writer.write(v > 0.0f ? v : 0.0f);
    }
    reader.close();
    writer.close();
    return t_out;
}
