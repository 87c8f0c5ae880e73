#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A monitoring agent against vqswitch's control socket, for benchmarks with the socket live.

Every PERIOD seconds, to every socket matching GLOB: lcore-show, rxq-show --json and stats, each
on a connection of its own (the protocol of docs/operations.md), all from this one process (no
fork per command, which on a 2-CPU machine would take CPU from the guests). Writes the count of
replies to COUNT_FILE as it goes.

  scripts/bench/ctl_poll.py [GLOB] [PERIOD] [COUNT_FILE]
  (defaults: '/run/vqswitch/*-vqs2.ctl' (switch_vs_ovs.sh's second variant), 0.2 s,
  /tmp/vqs-ctl-poll.count)
"""
import glob
import socket
import sys
import time

COMMANDS = (["lcore-show"], ["rxq-show", "--json"], ["stats"])


def ask(path, args):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        s.connect(path)
        s.sendall(b"".join(a.encode() + b"\0" for a in args))
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        return reply.startswith(b"ok")


def main():
    pattern = sys.argv[1] if len(sys.argv) > 1 else "/run/vqswitch/*-vqs2.ctl"
    period = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    count_file = sys.argv[3] if len(sys.argv) > 3 else "/tmp/vqs-ctl-poll.count"
    answered = 0
    while True:
        for path in glob.glob(pattern):
            for args in COMMANDS:
                try:
                    answered += ask(path, args)
                except OSError:
                    pass  # a switch frozen between its periods, or gone: next time
        with open(count_file, "w", encoding="utf-8") as out:
            out.write(f"{answered}\n")
        time.sleep(period)


if __name__ == "__main__":
    main()
