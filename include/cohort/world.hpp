// The World: this process's place in the job, connected to its peers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <cohort/communicator.hpp>
#include <cohort/launch_env.hpp>
#include <cohort/store.hpp>

namespace cohort {

struct InitOptions {
  /// Bound on connecting and on every blocking call of the World. Default:
  /// COHORT_TIMEOUT (seconds) when set, else 5 minutes.
  std::chrono::milliseconds timeout{0};
  /// The collectives backend by name ("self", "gloo"). Default: COHORT_BACKEND
  /// when set, else the viable backend of highest priority.
  std::string backend;
};

/// Who this process is (its LaunchInfo) and its connection to the job's
/// rendezvous store. Made by cohort::init(); movable, not copyable.
class World {
 public:
  World(World&&) noexcept;
  World& operator=(World&&) noexcept;
  ~World();

  const LaunchInfo& info() const noexcept;
  int rank() const noexcept { return info().rank.value; }
  int size() const noexcept { return info().world_size.value; }

  /// This job's store. Under `cohort run` it is a view private to the
  /// current restart attempt, so keys of a failed attempt never leak in.
  Store& store() noexcept;

  /// The backend communicator() uses ("self", "gloo"), known without
  /// connecting anything (from what the launcher says of the job's hosts;
  /// once communicator() connected, the one it chose from the ranks' actual
  /// hosts). Throws InvalidArgument for an unknown COHORT_BACKEND.
  std::string_view backend() const;

  /// The collectives of this world. Connects on first use, so a program that
  /// never communicates pays nothing. Throws PeerLost, Timeout or StoreError
  /// when the ranks cannot connect.
  Communicator& communicator();

  /// Returns once every rank has called barrier() as often as this one.
  /// Throws cohort::Timeout, naming how many ranks arrived, after `timeout`.
  void barrier(std::chrono::milliseconds timeout);
  void barrier();

 private:
  struct Impl;
  explicit World(std::unique_ptr<Impl> impl);
  friend World init(const InitOptions& options);
  std::unique_ptr<Impl> impl_;
};

/// Detects the launch environment and connects to the job's store (not yet to
/// the peers: communicator() does that on first use):
/// the agent's under `cohort run` (COHORT_STORE_ADDR, COHORT_STORE_PORT,
/// COHORT_JOB_TOKEN); otherwise rank 0 serves one on MASTER_ADDR:MASTER_PORT
/// and the others connect (a world of one serves itself on loopback).
/// Throws LaunchEnvError for a broken environment, StoreError when the store
/// cannot be reached within the timeout.
World init(const InitOptions& options = {});

}  // namespace cohort
