#!/usr/bin/env python3
"""Arguments for the ADBench GMM objective (bench/benches/gmm.adl).

    scripts/gmm_args.py D K N [SEED] > gmm_args.json

Prints the JSON array of arguments of @gmm for K components in D
dimensions and N points: alphas, means, icf, x, gamma, m, drawn from a
seeded generator (the same numbers for the same arguments), of the
sizes of ADBench's GMM inputs (alphas ~ N(0, 1), means and x ~ U(0, 1),
icf ~ U(-0.5, 0.5); gamma 1, m 0).
"""

import json
import random
import sys


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    d, k, n = (int(a) for a in sys.argv[1:4])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) == 5 else 1)
    alphas = [rng.gauss(0.0, 1.0) for _ in range(k)]
    means = [rng.random() for _ in range(k * d)]
    icf = [rng.random() - 0.5 for _ in range(k * d * (d + 1) // 2)]
    x = [rng.random() for _ in range(n * d)]
    json.dump([alphas, means, icf, x, 1.0, 0.0], sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
