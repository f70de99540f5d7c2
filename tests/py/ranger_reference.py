"""Ranger's steps in numpy, written from its papers' formulas (RAdam: Liu et al. 2019,
"On the Variance of the Adaptive Learning Rate and Beyond", Algorithm 2; Lookahead: Zhang et
al. 2019, Algorithm 1), with AdamW-style decay applied to the weight before the step.

Usage: ranger_reference.py SETTINGS_JSON; prints {"p0", "grads", "steps": [p after step t]}.
"""

import json
import sys

import numpy as np

s = json.loads(sys.argv[1])
rng = np.random.default_rng(s["seed"])
n, steps = s["n"], s["steps"]
p = rng.normal(size=n)
grads = [rng.normal(size=n) * (1.0 + 0.1 * t) for t in range(steps)]
b1, b2, eps, lr, wd = s["beta1"], s["beta2"], s["eps"], s["lr"], s["weight_decay"]
alpha, k, threshold = s["alpha"], s["k"], s["threshold"]

p0 = p.copy()
m = np.zeros(n)
v = np.zeros(n)
slow = p.copy()
rho_inf = 2.0 / (1.0 - b2) - 1.0
out = []
for t in range(1, steps + 1):
    g = grads[t - 1]
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1**t)
    rho = rho_inf - 2 * t * b2**t / (1 - b2**t)
    p = p * (1 - lr * wd)
    if rho > threshold:
        r = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
        # The paper's m̂/√v̂ with ε added to √v (as implementations do): m̂·√(1−β2^t)/(√v + ε).
        p = p - lr * r * m_hat * np.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
    else:
        p = p - lr * m_hat
    if t % k == 0:
        slow = slow + alpha * (p - slow)
        p = slow.copy()
    out.append(p.tolist())
print(json.dumps({"p0": p0.tolist(), "grads": [g.tolist() for g in grads], "steps": out}))
