"""slurm.py: a private Slurm cluster of many `slurmd -N` on this host, for bench/vs-slurm.

Everything lives in one temporary folder: its own munge key and socket, slurm.conf and
gres.conf, the controller's state, spool, logs and PID files, and typed GPU GRES on character
devices made there (mknod). Every daemon is started in the foreground by this process and
stopped by its PID.
"""
import os
import re
import shutil
import socket
import subprocess
import time
from datetime import datetime

import procs

# Tuned: the scheduler looks at the queue sooner and more often, and backfill goes on past
# its lock releases (bf_continue) instead of starting over.
TUNED = ("SchedulerParameters=bf_interval=1,sched_interval=1,bf_continue,bf_resolution=1,"
         "default_queue_depth=1000,bf_max_job_test=5000,sched_min_interval=100000,"
         "bf_yield_interval=1000000,max_rpc_cnt=400")
STOCK = ""  # the defaults: bf_interval=30, sched_interval=60, no bf_continue


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_range(n):
    """n consecutive free ports (slurmd Port=[a-b])."""
    for _ in range(200):
        base = free_port()
        if base + n >= 65535:
            continue
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no range of %d free ports" % n)


class SlurmCluster:
    def __init__(self, root, types, nodes_per_type, gpus, tuned):
        self.root = root
        self.types = types  # [(slurm type, einsora class)]
        self.nodes_per_type = nodes_per_type
        self.gpus = gpus
        self.tuned = tuned
        self.procs = []  # (name, Popen)
        self.conf = os.path.join(root, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.nodes = ["%s-%02d" % (t, i + 1) for t, _ in types for i in range(nodes_per_type)]

    def config_text(self):
        return self._conf

    def write_config(self):
        r = self.root
        for d in ("state", "spool", "dev", "log"):
            os.makedirs(os.path.join(r, d), exist_ok=True)
        # Character devices for the GRES files: NVIDIA's major number, one minor per GPU and type.
        for k, (t, _) in enumerate(self.types):
            for i in range(self.gpus):
                path = os.path.join(r, "dev", "%s-nvidia%d" % (t, i))
                if not os.path.exists(path):
                    os.mknod(path, 0o666 | 0o020000, os.makedev(195, k * self.gpus + i))
        host = socket.gethostname()
        ctl_port = free_port()
        base = free_port_range(len(self.nodes))
        lines = [
            "ClusterName=vsbench",
            "SlurmctldHost=%s" % host,
            "SlurmctldPort=%d" % ctl_port,
            "AuthType=auth/munge",
            "AuthInfo=socket=%s/munge.sock" % r,
            "CredType=cred/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            "StateSaveLocation=%s/state" % r,
            "SlurmdSpoolDir=%s/spool/%%n" % r,
            "SlurmctldPidFile=%s/slurmctld.pid" % r,
            "SlurmdPidFile=%s/slurmd-%%n.pid" % r,
            "SlurmctldLogFile=%s/log/slurmctld.log" % r,
            "SlurmdLogFile=%s/log/slurmd-%%n.log" % r,
            "LogTimeFormat=iso8601_ms",
            "SlurmctldDebug=info",
            "SlurmdDebug=error",
            "SlurmdParameters=config_overrides",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "GresTypes=gpu",
            "MaxJobCount=100000",
            "MinJobAge=300",
            "KillWait=5",
            "InactiveLimit=0",
        ]
        if self.tuned:
            lines.append(TUNED)
        port = base
        for t, _ in self.types:
            names = "%s-[01-%02d]" % (t, self.nodes_per_type)
            lines.append("NodeName=%s NodeHostname=%s Port=[%d-%d] CPUs=16 RealMemory=64000 Gres=gpu:%s:%d State=UNKNOWN"
                         % (names, host, port, port + self.nodes_per_type - 1, t, self.gpus))
            port += self.nodes_per_type
        lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self._conf = "\n".join(lines) + "\n"
        with open(self.conf, "w") as f:
            f.write(self._conf)
        with open(os.path.join(r, "gres.conf"), "w") as f:
            for t, _ in self.types:
                f.write("NodeName=%s-[01-%02d] Name=gpu Type=%s File=%s/dev/%s-nvidia[0-%d]\n"
                        % (t, self.nodes_per_type, t, r, t, self.gpus - 1))

    def _spawn(self, name, argv):
        log = open(os.path.join(self.root, "log", name + ".out"), "ab")
        p = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append((name, p))
        return p

    def start(self, attempts=3):
        """Up, every node idle. A port taken meanwhile by another program (they are picked
        free, then bound by the daemons) makes a daemon exit: start again on new ports."""
        for attempt in range(attempts):
            try:
                return self._start_once()
            except RuntimeError as e:
                self.stop()
                if attempt == attempts - 1:
                    raise
                print("slurm: %s; starting again on other ports" % e, flush=True)

    def _log_tail(self, name):
        lines = []
        for ext in (".out", ".log"):
            p = os.path.join(self.root, "log", name + ext)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    lines += f.read().strip().splitlines()[-3:]
        return " | ".join(lines)

    def _start_once(self):
        r = self.root
        self.write_config()
        key = os.path.join(r, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", ["munged", "-F", "--force", "--socket=%s/munge.sock" % r, "--key-file=%s" % key,
                               "--pid-file=%s/munged.pid" % r, "--seed-file=%s/munged.seed" % r,
                               "--log-file=%s/log/munged.log" % r, "--num-threads=4"])
        for _ in range(100):
            if os.path.exists(os.path.join(r, "munge.sock")):
                break
            time.sleep(0.05)
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        for n in self.nodes:
            os.makedirs(os.path.join(r, "spool", n), exist_ok=True)
            self._spawn("slurmd-" + n, ["slurmd", "-D", "-N", n, "-f", self.conf])
        deadline = time.time() + 90
        while time.time() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True)
            idle = [l for l in out.stdout.splitlines() if l.split()[-1:] == ["idle"]]
            if len(set(idle)) >= len(self.nodes):
                return
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("%s exited (%s): %s" % (name, p.returncode, self._log_tail(name)))
            time.sleep(0.5)
        raise RuntimeError("the Slurm nodes did not all come up idle; see %s/log" % r)

    def submit(self, gpus, slurm_type):
        out = subprocess.run(["sbatch", "--parsable", "-p", "gpu", "-n", "1", "--gres=gpu:%s:%d" % (slurm_type, gpus),
                              "-o", "/dev/null", "-e", "/dev/null", "--wrap", "sleep 2"],
                             env=self.env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("sbatch: " + out.stderr.strip())
        return int(out.stdout.strip().split(";")[0])

    def queue_empty(self):
        out = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True, text=True)
        return out.returncode == 0 and not out.stdout.strip()

    def stop(self):
        # By PID, the nodes first, then the controller, then munge.
        procs.stop_all(self.procs, timeout=15)

    def timeline(self):
        """{job id: {"submitted", "placed", "ended"}} in epoch seconds, from slurmctld's log."""
        stamp = r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\] "
        pats = [
            ("submitted", re.compile(stamp + r".*_slurm_rpc_submit_batch_job: JobId=(\d+)")),
            ("placed", re.compile(stamp + r"sched: Allocate JobId=(\d+)")),
            ("placed", re.compile(stamp + r"sched/backfill: _start_job: Started JobId=(\d+)")),
            ("ended", re.compile(stamp + r"_job_complete: JobId=(\d+)")),
        ]
        jobs = {}
        with open(os.path.join(self.root, "log", "slurmctld.log"), errors="replace") as f:
            for line in f:
                for key, pat in pats:
                    m = pat.match(line)
                    if m:
                        t = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
                        jobs.setdefault(int(m.group(2)), {}).setdefault(key, t)
                        break
        return jobs


def installed():
    return all(shutil.which(b) for b in ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "munged"))
