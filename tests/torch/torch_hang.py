"""Under `dtrain launch --set /output/hang_timeout_s=3`: rank 1 stops calling after five all_reduces
while rank 0 waits in the sixth; launch_hang.sh checks that the launcher names both."""

import time

from torch_common import dist, init, parse_args, run_main, torch


def main():
    init(parse_args())
    for _ in range(5):
        dist.all_reduce(torch.ones(100))
    if dist.get_rank() == 1:
        time.sleep(120)
    dist.all_reduce(torch.ones(100))


if __name__ == "__main__":
    run_main(main)
