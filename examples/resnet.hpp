// ResNet-18/34/50 as torchvision builds them (v1.5: the 3x3 convolution of a
// Bottleneck carries the stride), in LibTorch's C++ frontend, with
// torchvision's layer names and order, its weight initialisation and its
// in-place ReLUs, so the C++ and Python models have the same parameters in
// the same order and do the same work.
// Shared by examples/resnet50_ddp and bench/ddp.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace resnet {

namespace nn = torch::nn;

inline nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

inline nn::Sequential downsample(int64_t in, int64_t out, int64_t stride) {
  return nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out));
}

// Two 3x3 convolutions (ResNet-18, -34).
struct BasicBlockImpl : nn::Module {
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t in, int64_t width, int64_t stride) {
    conv1 = register_module("conv1", conv(in, width, 3, stride));
    bn1 = register_module("bn1", nn::BatchNorm2d(width));
    conv2 = register_module("conv2", conv(width, width, 3));
    bn2 = register_module("bn2", nn::BatchNorm2d(width));
    if (stride != 1 || in != width)
      shortcut = register_module("downsample", downsample(in, width, stride));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out));
    out += shortcut ? shortcut->forward(x) : x;
    return out.relu_();
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(BasicBlock);

// 1x1, 3x3 (with the stride), 1x1 widening by 4 (ResNet-50 and deeper).
struct BottleneckImpl : nn::Module {
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in, int64_t width, int64_t stride) {
    const int64_t out = width * kExpansion;
    conv1 = register_module("conv1", conv(in, width, 1));
    bn1 = register_module("bn1", nn::BatchNorm2d(width));
    conv2 = register_module("conv2", conv(width, width, 3, stride));
    bn2 = register_module("bn2", nn::BatchNorm2d(width));
    conv3 = register_module("conv3", conv(width, out, 1));
    bn3 = register_module("bn3", nn::BatchNorm2d(out));
    if (stride != 1 || in != out)
      shortcut = register_module("downsample", downsample(in, out, stride));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out)).relu_();
    out = bn3(conv3(out));
    out += shortcut ? shortcut->forward(x) : x;
    return out.relu_();
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(Bottleneck);

// 7x7 stem and max-pool, four stages of `Block`s (64, 128, 256, 512 wide),
// global average pool, one Linear.
template <typename Block>
struct ResNetImpl : nn::Module {
  ResNetImpl(const std::array<int64_t, 4>& blocks, int64_t classes) {
    conv1 = register_module("conv1", conv(3, 64, 7, 2));
    bn1 = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t width = int64_t{64} << stage;
      nn::Sequential layer;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        layer->push_back(Block(in, width, b == 0 && stage > 0 ? 2 : 1));
        in = width * Block::Impl::kExpansion;
      }
      layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc = register_module("fc", nn::Linear(in, classes));
    // torchvision's initialisation: He-normal (fan_out) convolutions,
    // BatchNorm at weight 1, bias 0; Linear keeps the default.
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* b = module->as<nn::BatchNorm2d>()) {
        nn::init::ones_(b->weight);
        nn::init::zeros_(b->bias);
      }
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(bn1(conv1(x)).relu_(), 3, 2, 1);
    for (auto& layer : layers)
      x = layer->forward(x);
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  std::vector<nn::Sequential> layers;
  nn::Linear fc{nullptr};
};

inline std::shared_ptr<ResNetImpl<BasicBlock>> resnet18(int64_t classes) {
  return std::make_shared<ResNetImpl<BasicBlock>>(std::array<int64_t, 4>{2, 2, 2, 2}, classes);
}
inline std::shared_ptr<ResNetImpl<Bottleneck>> resnet50(int64_t classes) {
  return std::make_shared<ResNetImpl<Bottleneck>>(std::array<int64_t, 4>{3, 4, 6, 3}, classes);
}

}  // namespace resnet
