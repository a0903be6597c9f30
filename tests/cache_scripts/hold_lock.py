"""Holds a compile cache key's lock the way a compiling plugin does, until killed.

Usage: python hold_lock.py LOCK_PATH
Takes an exclusive OFD lock (fcntl F_OFD_SETLKW, as the plugin does) on LOCK_PATH, prints
"locked", then sleeps. The kernel drops the lock when the process dies.
"""

import fcntl
import os
import struct
import sys
import time

F_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", 38)  # Linux x86-64

fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
# struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid (0 for OFD locks)
fcntl.fcntl(fd, F_OFD_SETLKW, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
print("locked", flush=True)
while True:
    time.sleep(60)
