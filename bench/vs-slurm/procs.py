"""procs.py: stop a system's daemons by PID, newest first (bench/vs-slurm)."""
import subprocess


def stop_all(procs, timeout):
    """Ask every (name, Popen) still running to end (SIGTERM), newest first, then wait up to
    timeout seconds for each and kill what has not ended. Empties the list."""
    for _name, p in reversed(procs):
        if p.poll() is None:
            p.terminate()
    for _name, p in reversed(procs):
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    procs.clear()
