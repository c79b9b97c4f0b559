// ImageFolder: torchvision's dataset layout, one subfolder per class,
//
//   DIR/cat/0001.jpg  DIR/cat/more/0002.png  DIR/dog/0001.jpg ...
//
// Classes are the subfolders of DIR sorted by name (label = position); the
// samples of a class are the image files anywhere under its folder (.jpg,
// .jpeg, .png, .bmp, .ppm, .pgm, .tga, .gif; any case), sorted by path.
// Images are decoded with stb_image (Debian's libstb-dev) when a batch is
// asked for, so only the indices this rank's sampler hands out are read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

class ImageFolder {
 public:
  /// Scans `root`; throws std::runtime_error naming the folder when it is
  /// missing, has no subfolders, or a class folder holds no image.
  explicit ImageFolder(const std::string& root);

  std::size_t size() const noexcept { return samples_.size(); }
  const std::vector<std::string>& classes() const noexcept { return classes_; }

  /// The samples at `indices` as a [N, 3, size, size] float batch and their
  /// [N] int64 labels. Each image is scaled so its shorter side is `size`,
  /// centre-cropped to a square and normalised with ImageNet's mean and
  /// standard deviation (torchvision's Resize + CenterCrop + Normalize); no
  /// augmentation. Throws std::runtime_error naming the file it cannot decode.
  std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<std::size_t>& indices,
                                                int64_t size) const;

  /// Whether this build can decode images (it was built with libstb-dev).
  static bool can_decode() noexcept;

 private:
  struct Sample {
    std::string path;
    int64_t label;
  };
  /// Decoded, scaled and cropped: 3 x size x size floats in [0, 1].
  torch::Tensor load(const Sample& sample, int64_t size) const;

  std::string root_;
  std::vector<std::string> classes_;
  std::vector<Sample> samples_;
};
