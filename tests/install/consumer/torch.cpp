// Built against the installed package with cohort::torch: LibTorch comes
// through find_package(cohort).
#include <cstdio>

#include <cohort/cohort.hpp>
#include <cohort/torch.hpp>

int main() {
  cohort::World world = cohort::init();
  auto model = std::make_shared<torch::nn::LinearImpl>(torch::nn::LinearOptions(1, 1).bias(false));
  cohort::torch::DistributedDataParallel ddp(model, world.communicator());
  (model->forward(torch::full({1, 1}, 3.0))).sum().backward();
  std::printf("consumer_torch: gradient %g after DDP on %d rank\n",
              model->weight.grad().item<double>(), world.size());
  return 0;
}
