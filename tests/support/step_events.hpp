#pragma once
// A worker step's hooks that write down what happened, in order, for the
// tests of step_pipeline and worker_step.
#include <string>
#include <vector>

#include "actors/worker/step_pipeline.hpp"

namespace troupe::testing {

struct step_events {
  std::vector<std::string> events; ///< "compute", "report 4", "fail: ...", ...
  std::vector<step_report> reports;

  step_hooks hooks() {
    step_hooks h;
    h.compute = [this] { events.push_back("compute"); };
    h.report = [this](const step_report& r) {
      reports.push_back(r);
      events.push_back("report " + std::to_string(r.step) + (r.applied ? "" : " not applied"));
    };
    h.nonfinite = [this] { events.push_back("nonfinite"); };
    h.over = [this] { events.push_back("over"); };
    h.recover = [this](const std::string& why, const std::string&) {
      events.push_back("recover: " + why);
    };
    h.fail = [this](const std::string& why, const failure&, run_end) {
      events.push_back("fail: " + why);
    };
    return h;
  }
};

} // namespace troupe::testing
