#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""One QMP command to a QEMU (started with -qmp unix:SOCKET,server=on,wait=off).

  qmp.py SOCKET COMMAND [ARGUMENTS_JSON]

Prints the command's "return" value as JSON (or the whole reply when it is an error); exits 1 on
an error reply. The test harness's way to migrate guests and read their state.
"""
import json
import socket
import sys
import time


def main():
    path, command = sys.argv[1], sys.argv[2]
    arguments = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    s = socket.socket(socket.AF_UNIX)
    for _ in range(50):  # QEMU may still be creating the socket
        try:
            s.connect(path)
            break
        except OSError:
            time.sleep(0.1)
    s.settimeout(10)
    f = s.makefile("rw")

    def reply():
        while True:  # events may come first
            msg = json.loads(f.readline())
            if "return" in msg or "error" in msg:
                return msg

    f.readline()  # the greeting
    for execute, args in (("qmp_capabilities", {}), (command, arguments)):
        f.write(json.dumps({"execute": execute, "arguments": args}) + "\n")
        f.flush()
        msg = reply()
    print(json.dumps(msg.get("return", msg)))
    return 0 if "return" in msg else 1


if __name__ == "__main__":
    sys.exit(main())
