// Pipeline schedules (schedule.hpp).
#include "schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace pipeline {

Schedule parse_schedule(const std::string& name) {
  if (name == "gpipe") return Schedule::gpipe;
  if (name == "1f1b") return Schedule::one_f_one_b;
  throw std::invalid_argument("unknown pipeline schedule '" + name + "': expected gpipe or 1f1b");
}

const char* schedule_name(Schedule s) { return s == Schedule::gpipe ? "gpipe" : "1f1b"; }

std::vector<Step> steps(Schedule s, int stage, int stages, int micro) {
  std::vector<Step> out;
  out.reserve(2 * static_cast<std::size_t>(micro));
  if (s == Schedule::gpipe) {
    for (int u = 0; u < micro; ++u) out.push_back({true, u});
    for (int u = 0; u < micro; ++u) out.push_back({false, u});
    return out;
  }
  const int warm = std::min(stages - stage - 1, micro);
  for (int u = 0; u < warm; ++u) out.push_back({true, u});
  for (int i = 0; i < micro - warm; ++i) {
    out.push_back({true, warm + i});
    out.push_back({false, i});
  }
  for (int u = micro - warm; u < micro; ++u) out.push_back({false, u});
  return out;
}

std::vector<Action> actions(const std::vector<Step>& order, int stage, int stages) {
  const bool first = stage == 0, last = stage == stages - 1;
  std::vector<Action> out;
  std::vector<bool> have_act(order.size(), false), have_grad(order.size(), false);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Step st = order[i];
    const Step* next = i + 1 < order.size() ? &order[i + 1] : nullptr;
    const auto u = static_cast<std::size_t>(st.micro);
    if (st.forward) {
      if (!first && !have_act[u]) out.push_back({Op::recv_act, st.micro});
      out.push_back({Op::forward, st.micro});
      if (last) continue;
      if (next != nullptr && !next->forward) {
        out.push_back({Op::send_act_recv_grad, st.micro, next->micro});
        have_grad[static_cast<std::size_t>(next->micro)] = true;
      } else {
        out.push_back({Op::send_act, st.micro});
      }
    } else {
      if (!last && !have_grad[u]) out.push_back({Op::recv_grad, st.micro});
      out.push_back({Op::backward, st.micro});
      if (first) continue;
      if (next != nullptr && next->forward) {
        out.push_back({Op::send_grad_recv_act, st.micro, next->micro});
        have_act[static_cast<std::size_t>(next->micro)] = true;
      } else {
        out.push_back({Op::send_grad, st.micro});
      }
    }
  }
  return out;
}

double bubble_formula(int stages, int micro) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro + stages - 1);
}

}  // namespace pipeline
