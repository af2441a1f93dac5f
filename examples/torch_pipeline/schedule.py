"""Pipeline schedules as pure data, as examples/pipeline/schedule.hpp has them for the C++ example.

steps(): the compute order of one stage over a step's micro-batches, as (forward, micro) pairs:

    gpipe: F0 F1 .. F(m-1) B0 B1 .. B(m-1)                 (a stage keeps m micro-batches' activations)
    1f1b:  min(p-s-1, m) warm-up forwards, then F B pairs, then the cool-down backwards (at most p-s)

actions(): what that order means in messages between adjacent stages. Activations go to the next
stage, gradients to the previous one; a send followed by a receive from the same neighbour is one
fused action (Megatron-LM's send_forward_recv_backward / send_backward_recv_forward), which the
worker runs as "the lower stage sends first, the higher one receives first", so two neighbours never
both wait in a send to each other.
"""

SCHEDULES = ("gpipe", "1f1b")


def steps(schedule, stage, stages, micro):
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown pipeline schedule '{schedule}': expected gpipe or 1f1b")
    if schedule == "gpipe":
        return [(True, u) for u in range(micro)] + [(False, u) for u in range(micro)]
    warm = min(stages - stage - 1, micro)
    out = [(True, u) for u in range(warm)]
    for i in range(micro - warm):
        out += [(True, warm + i), (False, i)]
    return out + [(False, u) for u in range(micro - warm, micro)]


def actions(order, stage, stages):
    """[(op, micro, other)]: op one of forward, backward, recv_act, send_act, recv_grad, send_grad,
    send_act_recv_grad (micro sent, other received, with stage + 1), send_grad_recv_act (with stage - 1)."""
    first, last = stage == 0, stage == stages - 1
    have_act, have_grad = set(), set()
    out = []
    for i, (forward, u) in enumerate(order):
        nxt = order[i + 1] if i + 1 < len(order) else None
        if forward:
            if not first and u not in have_act:
                out.append(("recv_act", u, -1))
            out.append(("forward", u, -1))
            if last:
                continue
            if nxt is not None and not nxt[0]:
                out.append(("send_act_recv_grad", u, nxt[1]))
                have_grad.add(nxt[1])
            else:
                out.append(("send_act", u, -1))
        else:
            if not last and u not in have_grad:
                out.append(("recv_grad", u, -1))
            out.append(("backward", u, -1))
            if first:
                continue
            if nxt is not None and nxt[0]:
                out.append(("send_grad_recv_act", u, nxt[1]))
                have_act.add(nxt[1])
            else:
                out.append(("send_grad", u, -1))
    return out
