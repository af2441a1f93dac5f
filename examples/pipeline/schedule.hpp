// Pipeline schedules as pure data: the order in which one stage runs the forward and backward passes
// of a step's micro-batches (GPipe or 1F1B), and the messages that order implies between adjacent
// stages. No communication, no clock: the worker interprets the actions, the tests simulate them.
//
//   gpipe: F0 F1 .. F(m-1) B0 B1 .. B(m-1)                    (keeps m micro-batches' activations)
//   1f1b:  min(p-s-1, m) warm-up forwards, then F B pairs, then the cool-down backwards (keeps at most
//          p-s), for stage s of p.
//
// Both idle a fraction (p-1)/(m+p-1) of a step when every forward and backward takes the same time.
#pragma once

#include <string>
#include <vector>

namespace pipeline {

enum class Schedule { gpipe, one_f_one_b };

// "gpipe" or "1f1b" (DTRAIN_PP_SCHEDULE); throws std::invalid_argument naming the value otherwise.
Schedule parse_schedule(const std::string& name);
const char* schedule_name(Schedule s);

struct Step {
  bool forward;  // false: backward
  int micro;
  bool operator==(const Step&) const = default;
};

// The compute order of stage `stage` of `stages` over `micro` micro-batches.
std::vector<Step> steps(Schedule s, int stage, int stages, int micro);

// What a stage does, in order. Activations go to the next stage, gradients to the previous one. A
// send followed by a receive from the same neighbour is fused into one sendrecv (Megatron-LM's
// send_forward_recv_backward and send_backward_recv_forward), so the 1F1B steady state never has two
// neighbours blocked sending to each other.
enum class Op {
  forward,            // micro
  backward,           // micro
  recv_act,           // micro, from stage - 1
  send_act,           // micro, to stage + 1
  recv_grad,          // micro, from stage + 1
  send_grad,          // micro, to stage - 1
  send_act_recv_grad, // micro (sent) to and other (received) from stage + 1
  send_grad_recv_act  // micro (sent) to and other (received) from stage - 1
};

struct Action {
  Op op;
  int micro;
  int other = -1;  // the received micro-batch of a fused op
  bool operator==(const Action&) const = default;
};

// The actions of stage `stage` of `stages` for the given compute order: the first stage receives no
// activations (it reads the data), the last receives no gradients (it computes the loss).
std::vector<Action> actions(const std::vector<Step>& order, int stage, int stages);

// (p-1)/(m+p-1): the idle fraction of either schedule with equal forward and backward times.
double bubble_formula(int stages, int micro);

}  // namespace pipeline
