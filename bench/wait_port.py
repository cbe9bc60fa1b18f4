#!/usr/bin/python3
"""bench/wait_port.py PORT: wait (30 s at most) until 127.0.0.1:PORT
accepts a connection, as the benchmark scripts do before their first run
against a server they started; exit 1 if it never does."""
import socket
import sys
import time

for _ in range(300):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
