"""Summary statistics of a file of numbers: one number per line; blank lines and lines starting with # are skipped.

Usage: python3 stats.py FILE
Prints four lines: count, mean, median and max (the last three with two decimals).
"""

import sys


def read_numbers(path):
    with open(path) as fh:
        lines = fh.read().split("\n")
    numbers = []
    for i in range(len(lines) - 1):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            continue
        numbers.append(float(line))
    return numbers


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def largest(values):
    best = 0
    for v in values:
        if v > best:
            best = v
    return best


def main():
    numbers = read_numbers(sys.argv[1])
    print(f"count {len(numbers)}")
    print(f"mean {sum(numbers) / len(numbers):.2f}")
    print(f"median {median(numbers):.2f}")
    print(f"max {largest(numbers):.2f}")


if __name__ == "__main__":
    main()
