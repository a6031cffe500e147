"""``kafkatool streams-reset``: Kafka 3.7's kafka-streams-application-reset.sh (StreamsResetter):
a Kafka Streams application's consumer group moved back on its input topics, to the end of its
intermediate topics, and its internal topics deleted, with the tool's options, checks, lines and
order of work.

The group's offsets are moved by the groups' reset (broker/group/live: plan_reset, commit as an
admin without a member), the Streams rules are assign/streams_reset's; this module reads the
options and prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    JSON_HELP,
    CommandError,
    command_config_option,
    emit_json,
    error_line,
    handle_errors,
    load_properties_file,
    modify_exit,
)
from kafkatool.formats.java_collections import java_collection_str

HELP = """Reset a Kafka Streams application, as Kafka 3.7's kafka-streams-application-reset.sh:
the application's consumer group (its application id) gets the input topics' offsets moved (to
the earliest offset by default, or by one of the reset options), the intermediate topics' offsets
at their end, and the application's internal topics are deleted: the topics named
<application.id>-...-changelog, -repartition and the foreign-key join's subscription topics, or
the subset given with --internal-topics. Output topics and the instances' local state stores
are left alone (call KafkaStreams#cleanUp() or delete state.dir before restarting). The group must
have no members (stop every instance), or --force removes them (LeaveGroup as an admin, a static
member by its group.instance.id). Run with --dry-run first: it changes nothing (Kafka 3.7 removes
the members even in a dry run) and prints the plan. An --internal-topics that is not a subset of
the inferred ones, or a --from-file without an offset for each input partition (or naming another
partition), is refused before anything changes (Kafka 3.7 finds the first after committing the
offsets). An input or intermediate topic the cluster lacks is skipped, as Kafka does, and the
exit status is 1."""

_SPECIFIERS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "from-file", "shift-by")


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _names(values: list[str] | None) -> list[str]:
    """A comma-separated, repeatable list option (joptsimple's withValuesSeparatedBy(','))."""
    return [x for v in values or [] for x in v.split(",") if x]


def _kind(given: dict[str, bool]) -> str:
    """The reset scenario, checked as StreamsResetterOptions checks it (CommandLineUtils.
    checkInvalidArgs for each option in turn); none given: to-earliest."""
    for used in _SPECIFIERS:
        if given[used]:
            for other in _SPECIFIERS:
                if other != used and given[other]:
                    raise CommandError(f'Option "[{used}]" can\'t be used with option "[{other}]"')
            return used
    return "to-earliest"


@handle_errors
def streams_reset(
    application_id: str = typer.Option(
        ..., "--application-id", metavar="ID", help="The Kafka Streams application ID (application.id)."
    ),
    bootstrap_server: str = typer.Option(
        "localhost:9092",
        "--bootstrap-server",
        "--bootstrap-servers",
        metavar="HOST:PORT[,HOST:PORT]",
        help="The server(s) to connect to (--bootstrap-servers: Kafka's deprecated name).",
    ),
    command_config: str | None = command_config_option(
        "--config-file",
        help="Property file containing configs to be passed to admin clients and embedded consumer "
        "(Kafka's --config-file): the security configs of --command-config, and the consumer's "
        "auto.offset.reset (where --shift-by starts from a partition the group never committed: "
        "latest by default).",
    ),
    input_topics: list[str] = typer.Option(
        None,
        "--input-topics",
        metavar="LIST",
        help="Comma-separated list of user input topics (repeatable). For these topics, the tool by "
        "default will reset the offset to the earliest available offset. Reset to other offset "
        "position by appending other reset offset option, ex: --input-topics foo --shift-by 5",
    ),
    intermediate_topics: list[str] = typer.Option(
        None,
        "--intermediate-topics",
        metavar="LIST",
        help="Comma-separated list of intermediate user topics (topics that are input and output "
        "topics, e.g., used in the deprecated through() method). For these topics, the tool will "
        "skip to the end.",
    ),
    internal_topics: list[str] = typer.Option(
        None,
        "--internal-topics",
        metavar="LIST",
        help="Comma-separated list of internal topics to delete. Must be a subset of the internal "
        "topics marked for deletion by the default behaviour (do a dry-run without this option to "
        "view these topics).",
    ),
    to_offset: int | None = typer.Option(
        None, "--to-offset", metavar="N", help="Reset offsets to a specific offset."
    ),
    to_datetime: str | None = typer.Option(
        None,
        "--to-datetime",
        metavar="ISO",
        help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss' (UTC unless "
        "a zone is given; or epoch milliseconds).",
    ),
    by_duration: str | None = typer.Option(
        None,
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'",
    ),
    to_earliest: bool = typer.Option(
        False, "--to-earliest", help="Reset offsets to earliest offset (the default)."
    ),
    to_latest: bool = typer.Option(False, "--to-latest", help="Reset offsets to latest offset."),
    from_file: Path | None = typer.Option(
        None,
        "--from-file",
        metavar="CSV",
        help="Reset offsets to values defined in CSV file: TOPIC,PARTITION,OFFSET lines, one for "
        "every partition of the input topics.",
    ),
    shift_by: int | None = typer.Option(
        None,
        "--shift-by",
        metavar="N",
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Display the actions that would be performed without executing the reset commands.",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Force the removal of members of the consumer group (intended to remove stopped members if "
        "a long session timeout was used). Make sure to shut down all stream applications when this "
        "option is specified to avoid unexpected rebalances.",
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Reset a Kafka Streams application (kafka-streams-application-reset.sh)."""
    from kafkatool.assign import streams_reset as S
    from kafkatool.assign import topics as T
    from kafkatool.assign.group_consumer import auto_offset_reset
    from kafkatool.assign.kafka_client import KafkaAdmin, describe_error
    from kafkatool.broker.group import live
    from kafkatool.commands.groups import read_reset_plan, reset_spec
    from kafkatool.errors import KafkatoolError

    app = application_id
    inputs, intermediates, specified = (
        _names(input_topics),
        _names(intermediate_topics),
        _names(internal_topics),
    )
    kind = _kind(
        {
            "to-offset": to_offset is not None,
            "to-datetime": to_datetime is not None,
            "by-duration": by_duration is not None,
            "to-earliest": to_earliest,
            "to-latest": to_latest,
            "from-file": from_file is not None,
            "shift-by": shift_by is not None,
        }
    )
    spec = reset_spec(kind, to_offset, shift_by, to_datetime, by_duration)
    props = load_properties_file(command_config, "--config-file") if command_config else {}
    try:
        spec.uncommitted = auto_offset_reset(props)
    except KafkatoolError as exc:
        raise CommandError(f"--config-file {command_config}: {exc}") from None
    if from_file is not None:
        spec.plan = read_reset_plan(from_file, [app], group_column=False).get(app, {})
        if not spec.plan:
            raise CommandError(f"{from_file}: Error parsing reset plan CSV file. It is empty")

    say = (lambda line: None) if json_out else _out
    emit = emit_json if json_out else (lambda obj: None)
    with KafkaAdmin(bootstrap_server, client_id="kafkatool-streams-reset") as admin:
        view = live.describe(admin, app)
        members = list(view.members)
        if members and not force:
            error_line(S.active_members_message(app, members))
            raise typer.Exit(EXIT_FINDINGS)
        all_topics = S.list_topics(admin)
        inferred = [t for t in all_topics if S.is_inferred_internal_topic(t, app, inputs, intermediates)]
        if specified and not set(specified) <= set(inferred):
            raise CommandError(S.invalid_internal_topics_message())
        input_tps, inter_tps = S.subscribed_partitions(admin, inputs, intermediates, all_topics)
        if spec.kind == "from-file" and input_tps:
            extra = [tp for tp in spec.plan if tp not in input_tps]
            if extra:
                raise CommandError(
                    f"{from_file}: {extra[0][0]}-{extra[0][1]} is not a partition of the input topics"
                )
            missing = [tp for tp in input_tps if tp not in spec.plan]
            if missing:
                raise CommandError(
                    f"{from_file}: no offset for input partition {missing[0][0]}-{missing[0][1]}"
                )

        # --force: Admin.removeMembersFromConsumerGroup of every member (not in a dry run)
        if members:
            say(f"Force deleting all active members in the group: {app}")
            errors = {} if dry_run else live.remove_members(admin, app, members)
            emit(
                {
                    "type": "members",
                    "group": app,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.instance_id,
                            "client_id": m.client_id,
                            "host": m.host,
                        }
                        for m in members
                    ],
                    "removed": not dry_run and not any(errors.values()),
                }
            )
            failed = {k: c for k, c in errors.items() if c}
            if failed:
                for who, code in failed.items():
                    error_line(f"Encounter exception when trying to remove: {who}: {describe_error(code)}")
                raise typer.Exit(EXIT_FINDINGS)
            if not dry_run:
                view = live.describe(admin, app)  # the committed offsets as the group now has them
        if dry_run:
            say(
                "----Dry run displays the actions which will be performed when running Streams Reset Tool----"
            )

        # maybeResetInputAndSeekToEndIntermediateTopicOffsets
        not_found = {
            "input": [t for t in inputs if t not in all_topics],
            "intermediate": [t for t in intermediates if t not in all_topics],
        }
        new: dict[tuple[str, int], int] = {}
        ends: dict[tuple[str, int], int] = {}
        commit_errors: dict[tuple[str, int], int] = {}
        if not inputs and not intermediates:
            say("No input or intermediate topics specified. Skipping seek.")
        else:
            if inputs:
                say(f"Reset-offsets for input topics {java_collection_str(inputs)}")
            if intermediates:
                say(f"Seek-to-end for intermediate topics {java_collection_str(intermediates)}")
            for what, sep in (("input", " "), ("intermediate", "")):
                if not_found[what]:
                    say(f"Following {what} topics are not found, skipping them")
                    for t in not_found[what]:
                        say(f"Topic:{sep}{t}")
                    emit({"type": "topics_not_found", "kind": what, "topics": not_found[what]})
            if input_tps or inter_tps:
                if input_tps:
                    say(f"Following input topics offsets will be reset to (for consumer group {app})")
                    notes: dict[tuple[str, int], live.ResetNote] = {}
                    new = live.plan_reset(admin, view, input_tps, spec, lambda n: notes.setdefault(n.tp, n))
                    for tp in S.note_order(spec.kind, input_tps, spec.plan):
                        if tp in notes:
                            n = notes[tp]
                            say(S.note_line(n))
                            emit(
                                {
                                    "type": "note",
                                    "topic": tp[0],
                                    "partition": tp[1],
                                    "kind": n.kind,
                                    "requested": n.requested,
                                    "value": n.value,
                                    "message": S.note_line(n),
                                }
                            )
                    for t, p in input_tps:
                        say(f"Topic: {t} Partition: {p} Offset: {new[(t, p)]}")
                if inter_tps:
                    say(
                        f"Following intermediate topics offsets will be reset to end (for consumer group {app})"
                    )
                    for t, _p in inter_tps:
                        say(f"Topic: {t}")
                    got = live.list_offsets(admin, inter_tps, live.LATEST)
                    for (t, p), off in got.items():
                        if off is None:
                            raise live.GroupsError(f"Error getting ending offset of topic partition: {t}-{p}")
                        ends[(t, p)] = off
                if not dry_run:
                    commit_errors = {
                        tp: c for tp, c in live.commit_offsets(admin, app, {**new, **ends}).items() if c
                    }
                committed = view.committed
                for what, tps, offs in (("input", input_tps, new), ("intermediate", inter_tps, ends)):
                    for tp in tps:
                        emit(
                            {
                                "type": "offset",
                                "group": app,
                                "kind": what,
                                "topic": tp[0],
                                "partition": tp[1],
                                "current_offset": committed.get(tp),
                                "new_offset": offs[tp],
                                "executed": not dry_run and tp not in commit_errors,
                                "error_code": commit_errors.get(tp, 0),
                            }
                        )
                if commit_errors:
                    for (t, p), c in sorted(commit_errors.items()):
                        error_line(f"group '{app}': committing {t}-{p} failed: {describe_error(c)}")
                    error_line("Resetting offsets failed.")
                    raise typer.Exit(EXIT_FINDINGS)
                say("Done.")

        # maybeDeleteInternalTopics
        to_delete = specified or inferred
        say(
            f"Deleting {'specified' if specified else 'inferred'} internal topics {java_collection_str(to_delete)}"
        )
        results = T.delete(admin, to_delete) if to_delete and not dry_run else {}
    for t in to_delete:
        code, msg = results.get(t, (0, None))
        emit(
            {
                "type": "internal_topic",
                "topic": t,
                "specified": bool(specified),
                "deleted": not dry_run and not code,
                "error_code": code,
                "error": T.error_text(code, msg) or None,
            }
        )
    delete_failed = {t: r for t, r in results.items() if r[0]}
    for t, (code, msg) in delete_failed.items():
        error_line(f"deleting topic {t}: {T.error_text(code, msg)}")
    if delete_failed:
        error_line("Encountered an error deleting one or more topics")
    else:
        say("Done.")
    committed = view.committed
    would_change = (
        bool(members)
        or bool(to_delete)
        or any(committed.get(tp) != off for tp, off in {**new, **ends}.items())
    )
    emit(
        {
            "type": "summary",
            "application_id": app,
            "dry_run": dry_run,
            "members_removed": 0 if dry_run else len(members),
            "input_topics_not_found": not_found["input"],
            "intermediate_topics_not_found": not_found["intermediate"],
            "offsets": len(new) + len(ends),
            "internal_topics": to_delete,
        }
    )
    if delete_failed or any(not_found.values()):
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(modify_exit(dry_run=dry_run, would_change=would_change, remaining=False))


def register(app: typer.Typer) -> None:
    app.command("streams-reset", help=HELP)(streams_reset)
