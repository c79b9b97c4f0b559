#include "image_folder.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>

#if COHORT_EXAMPLE_WITH_STB
#include <stb_image.h>
#endif

namespace fs = std::filesystem;

namespace {

bool is_image(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* known : {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tga", ".gif"})
    if (ext == known) return true;
  return false;
}

std::vector<std::string> images_under(const fs::path& folder) {
  std::vector<std::string> found;
  for (const auto& entry :
       fs::recursive_directory_iterator(folder, fs::directory_options::follow_directory_symlink))
    if (entry.is_regular_file() && is_image(entry.path())) found.push_back(entry.path().string());
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

ImageFolder::ImageFolder(const std::string& root) : root_(root) {
  std::error_code error;
  if (!fs::is_directory(root, error))
    throw std::runtime_error("--data " + root +
                             ": not a folder (give a folder with one subfolder per class)");
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory()) classes_.push_back(entry.path().filename().string());
  std::sort(classes_.begin(), classes_.end());
  if (classes_.empty())
    throw std::runtime_error(
        "--data " + root +
        ": no subfolders; put each class's images in a subfolder named after it");
  for (std::size_t label = 0; label < classes_.size(); ++label) {
    const std::vector<std::string> images = images_under(fs::path(root) / classes_[label]);
    if (images.empty())
      throw std::runtime_error("--data " + root + ": class folder '" + classes_[label] +
                               "' holds no image (.jpg .jpeg .png .bmp .ppm .pgm .tga .gif)");
    for (const std::string& path : images)
      samples_.push_back({path, static_cast<int64_t>(label)});
  }
}

bool ImageFolder::can_decode() noexcept {
  return COHORT_EXAMPLE_WITH_STB != 0;
}

std::pair<torch::Tensor, torch::Tensor> ImageFolder::batch(const std::vector<std::size_t>& indices,
                                                           int64_t size) const {
  std::vector<torch::Tensor> images;
  std::vector<int64_t> labels;
  images.reserve(indices.size());
  labels.reserve(indices.size());
  for (const std::size_t index : indices) {
    const Sample& sample = samples_.at(index);
    images.push_back(load(sample, size));
    labels.push_back(sample.label);
  }
  // ImageNet's mean and standard deviation, once for the whole batch.
  const torch::Tensor mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
  const torch::Tensor stddev = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
  return {(torch::stack(images) - mean) / stddev, torch::tensor(labels, torch::kInt64)};
}

torch::Tensor ImageFolder::load(const Sample& sample, int64_t size) const {
#if COHORT_EXAMPLE_WITH_STB
  int width = 0, height = 0, channels = 0;
  const std::unique_ptr<unsigned char, void (*)(void*)> pixels(
      stbi_load(sample.path.c_str(), &width, &height, &channels, 3), stbi_image_free);
  if (!pixels)
    throw std::runtime_error(sample.path + ": cannot decode (" + stbi_failure_reason() +
                             "); remove it from --data " + root_ + " or convert it to JPEG or PNG");
  // HWC bytes -> 1x3xHxW floats in [0, 1].
  torch::Tensor image = torch::from_blob(pixels.get(), {height, width, 3}, torch::kUInt8)
                            .permute({2, 0, 1})
                            .unsqueeze(0)
                            .to(torch::kFloat32)
                            .div_(255);
  // Shorter side to `size`, then the centre square.
  const double scale = double(size) / std::min(width, height);
  const int64_t scaled_h = std::max<int64_t>(size, std::llround(height * scale));
  const int64_t scaled_w = std::max<int64_t>(size, std::llround(width * scale));
  namespace F = torch::nn::functional;
  image = F::interpolate(image, F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{scaled_h, scaled_w})
                                    .mode(torch::kBilinear)
                                    .align_corners(false));
  return image.narrow(2, (scaled_h - size) / 2, size)
      .narrow(3, (scaled_w - size) / 2, size)
      .squeeze(0);
#else
  (void)size;
  throw std::runtime_error(sample.path +
                           ": this build cannot decode images; install libstb-dev "
                           "(scripts/install-deps) and rebuild");
#endif
}
