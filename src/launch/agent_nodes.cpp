// The agent at the end of an attempt of several nodes (agent.hpp): waiting
// for the job's verdict, restarting with the others, and finishing.
#include <algorithm>
#include <fstream>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"
#include "launch/agent.hpp"
#include "launch/console.hpp"
#include "launch/error_file.hpp"
#include "launch/exit_status.hpp"
#include "launch/launcher_variables.hpp"
#include "launch/program_check.hpp"
#include "launch/spawn.hpp"
#include "launch/worker_setup.hpp"

namespace cohort::detail {

void Agent::await_attempt_end() {
  group_->finished();
  while (!lifecycle_->first_stop() && !group_->all_done())
    loop_->turn();
}

bool Agent::settle_attempt() {
  detail::NodeGroup::Verdict verdict;
  try {
    verdict = group_->settle(*lifecycle_->first_stop(), options_.grace);
  } catch (const Error& error) {
    print(cat(error.what(), "\n"));
    return false;
  }
  lifecycle_->settled(verdict.stop);
  return verdict.restart;
}

bool Agent::restart_with_the_others(int attempt) {
  const detail::StopRecord stop = *lifecycle_->first_stop();
  const std::string where =
      stop.node >= 0 && !stop.node_lost
          ? cat(" (on ", stop.host, ", ", plan_.group.unit, " ", stop.node, ")")
          : "";
  const std::string next = group_->elastic()
                               ? cat("attempt ", attempt + 2)
                               : cat("attempt ", attempt + 2, " of ", options_.max_restarts + 1);
  if (lifecycle_->own_stop()) {
    detail::ReportInput input = report_input(attempt, true);
    input.other_nodes = cat("stopped: the ", group_->round_size() - 1, " other ", plan_.group.unit,
                            "s' workers, to restart with these");
    print(detail::failure_report(input));
  } else {
    print(cat("cohort run [", host_, "]: stopped ", my_ranks(), " here: ", stop.summary, where,
              "; restarting: ", next, "\n"));
  }
  attempts_.push_back(cat("attempt ", attempt + 1, ": ", stop.summary, where));
  if (timeline_) {
    timeline_->instant("restart", Timeline::kAgentTrack,
                       {{"next_attempt", cat(attempt + 1)}, {"reason", stop.summary + where}});
  }
  try {
    if (group_->elastic()) {  // settled: the next round's placement
      // A new round: who takes part, and so every rank, may have changed.
      const int world = placement_.world_size;
      placement_ = group_->join(options_.nproc_per_node, host_, node_name(), options_.run_id);
      if (timeline_) {
        timeline_->instant("membership", Timeline::kAgentTrack,
                           {{"nodes", cat(group_->round_size())},
                            {"world_size", cat(placement_.world_size)},
                            {"node_rank", cat(group_->node_rank())},
                            {"ranks", my_ranks()}});
      }
      if (placement_.world_size != world || group_->node_rank() == 0) {
        const int nodes = group_->round_size();
        print(cat("cohort run [", host_, "]: attempt ", attempt + 2, " runs on ", nodes, " ",
                  plan_.group.unit, nodes == 1 ? ", " : "s, ", placement_.world_size, " workers; ",
                  my_ranks(), " here (", plan_.group.unit, " ", group_->node_rank(), ")\n"));
      }
    } else {
      const int port = group_->begin_next_attempt(stop, options_.grace);
      // Workers that meet in the agent's store keep its port (PyTorch puts
      // each attempt's keys under /worker/attempt_K); else rank 0 listens
      // on a fresh one, never the last attempt's.
      if (!options_.agent_store) placement_.master_port = port;
    }
  } catch (const Error& error) {  // the nodes did not meet in time, or the store is gone
    print(cat(error.what(), "\n"));
    return false;
  } catch (const StoppedWhileWaiting& stopped) {  // told to stop between two attempts
    act(lifecycle_->stopped_between_attempts(stopped.signal));
    return false;
  }
  return true;
}

std::string Agent::my_ranks() const {
  return options_.nproc_per_node == 1 ? cat("rank ", placement_.rank_base)
                                      : cat("ranks ", placement_.rank_base, "-",
                                            placement_.rank_base + options_.nproc_per_node - 1);
}

int Agent::finish_node() {
  group_->finished();
  const std::optional<detail::StopRecord>& first_stop = lifecycle_->first_stop();
  const std::string mine = my_ranks();
  // The attempts before this one, once, where the job's store is served.
  if (!attempts_.empty() && group_->node_rank() == 0) {
    const std::string budget =
        group_->elastic() ? cat(group_->restarts(), " for failures, of --max-restarts ",
                                options_.max_restarts, "; the others for elastic membership")
                          : cat("--max-restarts ", options_.max_restarts, " for the whole job");
    print(cat("cohort run: the job restarted ", attempts_.size(),
              attempts_.size() == 1 ? " time" : " times", " (", budget, "):\n  ",
              detail::join(attempts_, "\n  "), "\n  attempt ", attempts_.size() + 1, ": ",
              first_stop ? cat(first_stop->summary, " on ", first_stop->host)
                         : std::string("every rank succeeded"),
              "\n"));
  }
  if (lifecycle_->cause() == StopCause::worker_failed && lifecycle_->own_stop()) {
    detail::ReportInput input = report_input(group_->attempt(), false);
    input.other_nodes = cat("told to stop: ", group_->round_size() - 1, " other ", plan_.group.unit,
                            "s, the ranks other than ", mine.substr(mine.find(' ') + 1));
    print(detail::failure_report(input));
  } else if (first_stop && !lifecycle_->own_stop()) {
    print(
        cat("cohort run [", host_, "]: stopped ", mine, " here: ", first_stop->summary,
            first_stop->rank >= 0 && first_stop->node != group_->node_rank()
                ? cat(" (on ", first_stop->host, ", ", plan_.group.unit, " ", first_stop->node, ")")
                : std::string(),
            "; exit status ", first_stop->exit_code, "\n"));
  }
  if (group_->serves_store()) await_other_nodes();
  return exit_code();
}

void Agent::await_other_nodes() {
  const auto bound = options_.grace + 2 * options_.heartbeat_timeout;
  if (lifecycle_->first_stop()) {
    group_->linger(bound);
    return;
  }
  bool stopped = false;
  loop_->watch(group_->event_fd(), [&] {
    std::uint64_t count = 0;
    (void)!::read(group_->event_fd(), &count, sizeof(count));
    if (auto record = group_->stop_record()) {
      lifecycle_->heard(*record);
      stopped = true;
    }
  });
  loop_->on_signal([&](int signal) {
    if (stopped || !detail::stops_the_job(signal)) return;
    act(lifecycle_->stopped_between_attempts(signal));
    stopped = true;
  });
  loop_->cancel_deadline(kJobDeadline);  // the workers are done
  while (!stopped && !group_->all_done())
    loop_->turn();
  if (stopped) {
    group_->linger(bound);
  } else {
    (void)group_->see_off(bound);
  }
}

}  // namespace cohort::detail
