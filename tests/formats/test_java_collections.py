"""java.util.HashMap's iteration order (what Kafka's tools print maps and sets in), against
orders a real JDK printed (OpenJDK 17.0.15: its HashMap(), HashMap(int) and put are JDK 21's)."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from kafkatool.formats import java_collections as J


def ints(keys, capacity=None):
    return J.hash_map_order(keys, J.java_int_hash, capacity)


def test_orders_a_jdk_printed():
    # a 9th key in one bucket of a 16-table doubles it instead of making a tree
    assert ints([0, 16, 32, 48, 64, 80, 96, 112, 128]) == [0, 32, 64, 96, 128, 16, 48, 80, 112]
    assert ints([0, 16, 32, 48, 64, 80, 96, 112]) == [0, 16, 32, 48, 64, 80, 96, 112]
    # past 12 keys a default map has 32 buckets
    assert ints([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 33]) == [1, 33, 2, *range(3, 14), 17]
    assert ints([1, 5, 9, 17, 33, 2], 3) == [1, 9, 17, 33, 2, 5]
    assert ints([1001, 1002, 1003, 2001, 5], 4) == [1001, 2001, 1002, 1003, 5]
    dirs = (
        "/data/kafka-logs-1 /data/kafka-logs-2 /data/kafka-logs-3 /mnt/disk1/kafka /mnt/disk2/kafka".split()
    )
    assert J.hash_map_order(dirs, J.java_string_hash) == [dirs[2], dirs[1], dirs[0], dirs[3], dirs[4]]
    assert J.hash_map_order(["/tmp/ldt/d1", "/tmp/ldt/d2"], J.java_string_hash, 2) == [
        "/tmp/ldt/d2",
        "/tmp/ldt/d1",
    ]
    tps = [("ld-a", 0), ("ld-a", 2), ("ld-b", 0)]
    twice = J.hash_map_order(J.hash_map_order(tps, J.topic_partition_hash), J.topic_partition_hash)
    assert twice == [("ld-a", 2), ("ld-b", 0), ("ld-a", 0)]
    # LogDirsCommand's anonymous HashMaps, as Jackson printed them
    assert list(J.java_map([("version", 1), ("brokers", [])])) == ["brokers", "version"]
    assert list(J.java_map([("broker", 1), ("logDirs", [])])) == ["broker", "logDirs"]
    assert list(J.java_map([("logDir", "d"), ("error", None), ("partitions", [])])) == [
        "partitions",
        "error",
        "logDir",
    ]
    keys = ["partition", "size", "offsetLag", "isFuture"]
    assert list(J.java_map([(k, 0) for k in keys])) == keys


def test_hashes():
    assert J.java_string_hash("") == 0 and J.java_string_hash("hello") == 99162322
    # Long.hashCode: (int) (v ^ (v >>> 32))
    assert J.java_long_hash(7) == 7 and J.java_long_hash(-1) == 0 and J.java_long_hash(2**32) == 1
    assert J.java_long_hash(-(2**63)) == -(2**31)
    assert J.java_string_hash("polygenelubricants") == -(2**31)  # Java's famous MIN_VALUE hash
    assert J.topic_partition_hash(("t", 0)) == 31 * 31 + ord("t")
    assert J.table_size_for(0) == 1 and J.table_size_for(3) == 4 and J.table_size_for(16) == 16
    assert J.copy_capacity(3) == 4 and J.copy_capacity(0) is None and J.set_copy_capacity(3) == 16


_JAVA = """
import java.util.*;
public class Order {
  public static void main(String[] a) {
    Scanner sc = new Scanner(System.in);
    while (sc.hasNextLine()) {
      String[] f = sc.nextLine().split(" ");
      int cap = Integer.parseInt(f[0]);
      Map<Object, Integer> m = cap < 0 ? new HashMap<>() : new HashMap<>(cap);
      for (int i = 2; i < f.length; i++)
        m.put(f[1].equals("i") ? (Object) Integer.valueOf(f[i]) : f[1].equals("l") ? (Object) Long.valueOf(f[i]) : f[i], 0);
      StringBuilder out = new StringBuilder();
      for (Object k : m.keySet()) out.append(k).append(' ');
      System.out.println(out.toString().trim());
    }
  }
}
"""


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK here")
def test_random_maps_against_the_jdk(tmp_path):
    """400 random maps (Integer, String and Long keys), each put into a real HashMap: the same
    order wherever no bucket became a tree (nine keys in one bucket of a table of 64 or more: Java ties those by
    identity hash codes, no fixed order)."""
    (tmp_path / "Order.java").write_text(_JAVA)
    subprocess.run(["javac", "Order.java"], cwd=tmp_path, check=True, timeout=120)
    rnd = random.Random(11)
    cases = []
    for n in range(300):
        cap = rnd.choice([-1, 0, 1, 2, 3, 5, 12, 16, 40])
        if n % 2:
            keys = [rnd.randrange(0, 1 << rnd.choice([5, 12, 20])) for _ in range(rnd.randrange(1, 100))]
            cases.append((cap, "i", keys, ints(keys, None if cap < 0 else cap)))
        else:
            keys = [f"/d{rnd.randrange(3000)}/x-{rnd.randrange(50)}" for _ in range(rnd.randrange(1, 200))]
            cases.append(
                (cap, "s", keys, J.hash_map_order(keys, J.java_string_hash, None if cap < 0 else cap))
            )
    for _ in range(100):  # Long keys (producer ids: kafka-transactions.sh's HashMap<Long, ...>)
        cap = rnd.choice([-1, 0, 3, 16])
        keys = [
            rnd.choice([rnd.randrange(0, 5000), rnd.randrange(-(2**63), 2**63)])
            for _ in range(rnd.randrange(1, 60))
        ]
        cases.append((cap, "l", keys, J.hash_map_order(keys, J.java_long_hash, None if cap < 0 else cap)))
    stdin = "".join(f"{c} {k} {' '.join(map(str, ks))}\n" for c, k, ks, _ in cases)
    out = subprocess.run(
        ["java", "-cp", str(tmp_path), "Order"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(cases)
    for (_, _, _, mine), java in zip(cases, out, strict=True):
        assert " ".join(map(str, mine)) == java
