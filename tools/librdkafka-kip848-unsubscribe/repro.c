/* Deterministic reproducer of the librdkafka KIP-848 hang behind 0045 subscribe_many_updates:
 * unsubscribe() (then subscribe()) while a coordinator-driven revocation is still waiting for
 * the application's rebalance callback.
 *
 *   repro mock            - against librdkafka's own mock cluster (rdkafka_mock)
 *   repro <bootstrap>     - against a real broker (topics are created with CreateTopics)
 *   add "control" as 2nd arg to poll (serve the revocation) before unsubscribing.
 *
 * Exit 0: the consumer ends with the last subscription's partitions; 1: it does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include "rdkafka.h"
#include "rdkafka_mock.h"

static char topics[3][64];

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
        rd_kafka_error_t *e;
        fprintf(stderr, "REPRO rebalance_cb %s of %d partition(s)\n", rd_kafka_err2name(err),
                parts->cnt);
        if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS)
                e = rd_kafka_incremental_assign(rk, parts);
        else
                e = rd_kafka_incremental_unassign(rk, parts);
        if (e) {
                fprintf(stderr, "REPRO rebalance error %s\n", rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
        }
}

static void subscribe(rd_kafka_t *rk, int from, int to) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(3);
        int i;
        for (i = from; i <= to; i++)
                rd_kafka_topic_partition_list_add(l, topics[i], RD_KAFKA_PARTITION_UA);
        fprintf(stderr, "REPRO subscribe topics %d..%d: %s\n", from, to,
                rd_kafka_err2name(rd_kafka_subscribe(rk, l)));
        rd_kafka_topic_partition_list_destroy(l);
}

static int assigned(rd_kafka_t *rk, int topic) {
        rd_kafka_topic_partition_list_t *a;
        int i, n = 0, other = 0;
        rd_kafka_assignment(rk, &a);
        for (i = 0; i < a->cnt; i++) {
                if (!strcmp(a->elems[i].topic, topics[topic]))
                        n++;
                else
                        other++;
        }
        rd_kafka_topic_partition_list_destroy(a);
        return other ? -1 : n;
}

static int count_assigned(rd_kafka_t *rk) {
        rd_kafka_topic_partition_list_t *a;
        int n;
        rd_kafka_assignment(rk, &a);
        n = a->cnt;
        rd_kafka_topic_partition_list_destroy(a);
        return n;
}

/* polls (serving rebalance callbacks) until \p want partitions of topic \p topic and
 * nothing else are assigned, or \p secs pass */
static int wait_assigned(rd_kafka_t *rk, int topic, int want, int secs) {
        time_t end = time(NULL) + secs;
        while (time(NULL) < end) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (m) {
                        if (m->err)
                                fprintf(stderr, "REPRO consumer error: %s\n",
                                        rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                }
                if (assigned(rk, topic) == want)
                        return 1;
        }
        return 0;
}

int main(int argc, char **argv) {
        char errstr[512], group[64];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_mock_cluster_t *mcluster = NULL;
        rd_kafka_t *mrk = NULL, *rk;
        const char *bootstrap;
        int control = argc > 2 && !strcmp(argv[2], "control");
        int i, ok;
        unsigned int tag = (unsigned int)time(NULL) ^ (unsigned int)getpid();

        for (i = 0; i < 3; i++)
                snprintf(topics[i], sizeof(topics[i]), "repro0045_%08x_t%d", tag, i);
        snprintf(group, sizeof(group), "repro0045_%08x", tag);

        if (argc < 2) {
                fprintf(stderr, "usage: %s mock|<bootstrap> [control]\n", argv[0]);
                return 2;
        }
        if (!strcmp(argv[1], "mock")) {
                mrk = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), errstr,
                                   sizeof(errstr));
                mcluster = rd_kafka_mock_cluster_new(mrk, 1);
                for (i = 0; i < 3; i++)
                        rd_kafka_mock_topic_create(mcluster, topics[i], 4, 1);
                bootstrap = rd_kafka_mock_cluster_bootstraps(mcluster);
        } else
                bootstrap = argv[1];

        rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, NULL, 0);
        rd_kafka_conf_set(conf, "group.id", group, NULL, 0);
        rd_kafka_conf_set(conf, "group.protocol", "consumer", NULL, 0);
        rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", NULL, 0);
        if (getenv("REPRO_DEBUG"))
                rd_kafka_conf_set(conf, "debug", getenv("REPRO_DEBUG"), NULL, 0);
        rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
        rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
        if (!rk) {
                fprintf(stderr, "REPRO %s\n", errstr);
                return 2;
        }
        rd_kafka_poll_set_consumer(rk);

        if (!mcluster) {
                rd_kafka_NewTopic_t *nt[3];
                rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
                rd_kafka_event_t *ev;
                for (i = 0; i < 3; i++)
                        nt[i] = rd_kafka_NewTopic_new(topics[i], 4, 1, NULL, 0);
                rd_kafka_CreateTopics(rk, nt, 3, NULL, q);
                ev = rd_kafka_queue_poll(q, 30000);
                fprintf(stderr, "REPRO CreateTopics: %s\n",
                        ev ? rd_kafka_err2name(rd_kafka_event_error(ev)) : "timeout");
                if (ev)
                        rd_kafka_event_destroy(ev);
                for (i = 0; i < 3; i++)
                        rd_kafka_NewTopic_destroy(nt[i]);
                rd_kafka_queue_destroy(q);
                sleep(1);
        }

        /* 1. a stable member owning t0 and t1 */
        subscribe(rk, 0, 1);
        for (i = 0; i < 300 && !(assigned(rk, 0) == -1 && count_assigned(rk) == 8); i++) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (m)
                        rd_kafka_message_destroy(m);
        }
        fprintf(stderr, "REPRO step 1: %d partition(s) assigned\n", count_assigned(rk));
        if (count_assigned(rk) != 8)
                return 2;
        sleep(1); /* let the acknowledging heartbeat go */

        /* 2. drop t0: the coordinator answers with t0 to revoke first; the app does not poll,
         *    so the revocation waits for the rebalance callback */
        subscribe(rk, 1, 2);
        if (control) {
                wait_assigned(rk, 1, 4, 2); /* serve the revocation */
                fprintf(stderr, "REPRO control: revocation served before unsubscribe\n");
        } else
                sleep(2);

        /* 3. unsubscribe and subscribe again while that revocation is pending */
        fprintf(stderr, "REPRO unsubscribe: %s\n", rd_kafka_err2name(rd_kafka_unsubscribe(rk)));
        subscribe(rk, 2, 2);

        /* 4. the consumer should end with t2's four partitions */
        ok = wait_assigned(rk, 2, 4, 30);
        fprintf(stderr, "REPRO result: %s (t2 partitions assigned: %d)\n",
                ok ? "PASS" : "STUCK", assigned(rk, 2));

        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        if (mcluster) {
                rd_kafka_mock_cluster_destroy(mcluster);
                rd_kafka_destroy(mrk);
        }
        return ok ? 0 : 1;
}
