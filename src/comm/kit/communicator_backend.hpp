// A Backend that forwards every call to a Communicator: what a backend's
// split() returns when the subgroup is best served by another backend
// (create_communicator chose it for the subgroup's own ranks and hosts).
#pragma once

#include <memory>
#include <utility>

#include "comm/backend.hpp"

namespace cohort::detail {

class CommunicatorBackend final : public Backend {
 public:
  explicit CommunicatorBackend(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::string_view name() const noexcept override { return inner_->backend(); }
  Duration default_timeout() const noexcept override { return inner_->default_timeout(); }

  void all_reduce(Buffer data, ReduceOp op, Duration timeout) override {
    inner_->all_reduce(data, op, timeout);
  }
  void broadcast(Buffer data, int root, Duration timeout) override {
    inner_->broadcast(data, root, timeout);
  }
  void reduce(Buffer data, ReduceOp op, int root, Duration timeout) override {
    inner_->reduce(data, op, root, timeout);
  }
  void all_gather(Buffer input, Buffer output, Duration timeout) override {
    inner_->all_gather(input, output, timeout);
  }
  void gather(Buffer input, Buffer output, int root, Duration timeout) override {
    inner_->gather(input, output, root, timeout);
  }
  void scatter(Buffer input, Buffer output, int root, Duration timeout) override {
    inner_->scatter(input, output, root, timeout);
  }
  void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) override {
    inner_->reduce_scatter(input, output, op, timeout);
  }
  void all_to_all(Buffer input, Buffer output, Duration timeout) override {
    inner_->all_to_all(input, output, timeout);
  }
  void barrier(Duration timeout) override { inner_->barrier(timeout); }
  void send(Buffer data, int peer, int tag, Duration timeout) override {
    inner_->send(data, peer, tag, timeout);
  }
  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    inner_->recv(data, peer, tag, timeout);
  }
  std::unique_ptr<Backend> split(int color, int key) override {
    std::unique_ptr<Communicator> part = inner_->split(color, key);
    if (!part) return nullptr;
    return std::make_unique<CommunicatorBackend>(std::move(part));
  }
  std::shared_ptr<void> allocate(std::size_t bytes, Duration timeout) override {
    return inner_->allocate(bytes, timeout);
  }

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace cohort::detail
