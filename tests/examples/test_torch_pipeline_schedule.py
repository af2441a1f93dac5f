"""examples/torch_pipeline/schedule.py without processes: for 1 to 4 stages, 1 to 8 micro-batches and
both schedules, every stage's actions, expanded into the blocking sends and receives the worker makes
(a fused action: the lower stage sends first, the higher receives first), run to the end when a send
completes only together with its receive (no buffering at all, the strictest reading): no deadlock,
every message received as what was sent, each forward after its input arrived and each backward
after its forward and its gradient; GPipe holds m micro-batches' activations, 1F1B at most p - s.

    test_torch_pipeline_schedule.py EXAMPLE_DIR
"""
import sys

sys.path.insert(0, sys.argv[1])
import schedule  # noqa: E402


def primitives(acts, stage):
    """(kind, peer, payload) with kind send/recv/compute; payload (what, micro)."""
    out = []
    for op, u, other in acts:
        if op in ("forward", "backward"):
            out.append(("compute", None, (op, u)))
        elif op == "recv_act":
            out.append(("recv", stage - 1, ("act", u)))
        elif op == "send_act":
            out.append(("send", stage + 1, ("act", u)))
        elif op == "recv_grad":
            out.append(("recv", stage + 1, ("grad", u)))
        elif op == "send_grad":
            out.append(("send", stage - 1, ("grad", u)))
        elif op == "send_act_recv_grad":
            out += [("send", stage + 1, ("act", u)), ("recv", stage + 1, ("grad", other))]
        elif op == "send_grad_recv_act":
            out += [("recv", stage - 1, ("act", other)), ("send", stage - 1, ("grad", u))]
        else:
            raise AssertionError(f"unknown action {op}")
    return out


def simulate(name, p, m):
    progs = [primitives(schedule.actions(schedule.steps(name, s, p, m), s, p), s) for s in range(p)]
    pc = [0] * p
    got = [set() for _ in range(p)]     # messages received
    done = [set() for _ in range(p)]    # ("forward"|"backward", u) computed
    held = [0] * p
    peak = [0] * p
    while any(pc[s] < len(progs[s]) for s in range(p)):
        moved = False
        for s in range(p):
            if pc[s] >= len(progs[s]):
                continue
            kind, peer, (what, u) = progs[s][pc[s]]
            if kind == "compute":
                if what == "forward":
                    assert s == 0 or ("act", u) in got[s], f"{name} p={p} m={m}: stage {s} forward {u} before its input"
                    held[s] += 1
                    peak[s] = max(peak[s], held[s])
                else:
                    assert ("forward", u) in done[s], f"{name}: stage {s} backward {u} before its forward"
                    assert s == p - 1 or ("grad", u) in got[s], f"{name}: stage {s} backward {u} before its gradient"
                    held[s] -= 1
                done[s].add((what, u))
                pc[s] += 1
                moved = True
            elif kind == "send" and pc[peer] < len(progs[peer]):
                k2, p2, msg = progs[peer][pc[peer]]
                if k2 == "recv" and p2 == s:
                    assert msg == (what, u), f"{name} p={p} m={m}: stage {peer} receives {msg}, stage {s} sends {(what, u)}"
                    got[peer].add(msg)
                    pc[s] += 1
                    pc[peer] += 1
                    moved = True
        if not moved:
            stuck = {s: progs[s][pc[s]] for s in range(p) if pc[s] < len(progs[s])}
            raise AssertionError(f"{name} p={p} m={m}: deadlock, each stage waiting in {stuck}")
    for s in range(p):
        assert done[s] == {(w, u) for w in ("forward", "backward") for u in range(m)}, f"{name}: stage {s} incomplete"
        limit = m if name == "gpipe" else min(p - s, m)
        assert peak[s] == limit, f"{name} p={p} m={m}: stage {s} held {peak[s]} micro-batches, expected {limit}"


def main():
    cases = 0
    for name in schedule.SCHEDULES:
        for p in range(1, 5):
            for m in range(1, 9):
                simulate(name, p, m)
                cases += 1
    try:
        schedule.steps("zigzag", 0, 2, 2)
        raise AssertionError("an unknown schedule was accepted")
    except ValueError as e:
        assert "expected gpipe or 1f1b" in str(e), e
    print(f"ok: {cases} (schedule, stages, micro-batches) run to the end without buffering")


if __name__ == "__main__":
    main()
