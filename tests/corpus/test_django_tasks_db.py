"""Django's task framework with the django-tasks-db backend (PyPI; Django 6, Python >= 3.12).

``db_worker`` claims with ``DBTaskResult.objects.ready().filter(backend_name=...)
.select_for_update(skip_locked=True).first()``: ``WHERE status = 'READY' AND (run_after =
'9999-01-01' OR run_after <= now) AND backend_name = 'default' ORDER BY priority DESC,
run_after ASC, enqueued_at ASC LIMIT 1 FOR UPDATE SKIP LOCKED``, served by
``tasks_db_new_ordering_idx (status, priority DESC, run_after, enqueued_at) WHERE status =
'READY'`` (a task without run_after gets 9999-01-01). The ORM passes 'READY' as a parameter:
psycopg's default client-side binding sends it to the server as a literal; with
``OPTIONS = {"server_side_binding": True}`` it is a real ``$1``, and psycopg prepares the
statement after five executions, so generic plans are possible. Finished tasks stay in the
table (SUCCESSFUL / FAILED) until ``prune_db_task_results`` deletes them.
"""

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Workload

TABLE = "django_tasks_database_dbtaskresult"
ARCHIVE_ROWS = 1_000_000
ENV = envs.PythonEnv(
    "django-tasks-db",
    ("django-tasks-db==0.13.0", "Django==6.1.3", "psycopg[binary]==3.3.9"),
    min_python=(3, 12),
)
AGE_SQL = (
    # Succeeded tasks as db_worker leaves them: started and finished, one worker id, no
    # result; run_after is the "no time given" maximum, as for every task enqueued here.
    f"""
    INSERT INTO {TABLE} (id, status, args_kwargs, priority, task_path, queue_name,
                         backend_name, run_after, enqueued_at, started_at, finished_at,
                         return_value, exception_class_path, traceback, worker_ids)
    SELECT gen_random_uuid(), 'SUCCESSFUL', jsonb_build_object('args', jsonb_build_array(g),
                                                               'kwargs', '{{}}'::jsonb),
           0, 'django_driver.noop',
           CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                ELSE 'reports' END,
           'default', '9999-01-01 00:00:00+00', t, t + interval '5 ms', t + interval '7 ms',
           NULL, '', '', jsonb_build_array(md5(g::text))
      FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
           LATERAL (SELECT now() - interval '12 days' + g * interval '1 second' AS t) AS at
    """,
)
# Smaller than the other libraries': db_worker claims, runs and finishes one task per
# transaction, about 25 a second while the other libraries are built beside it.
WORKLOAD = Workload((("default", 960), ("emails", 120), ("reports", 60)), scheduled=60)
RERUN = Workload((("default", 240), ("emails", 30), ("reports", 20)), scheduled=20)
DONE_SQL = f"SELECT count(*) FROM {TABLE} WHERE status = 'SUCCESSFUL'"

CLIENT_BINDING = Library(
    name="django_tasks_db",
    env=ENV,
    driver="django_driver.py",
    done_sql=DONE_SQL,
    age_sql=AGE_SQL,
    workload=WORKLOAD,
    rerun=RERUN,
)
SERVER_BINDING = Library(
    name="django_tasks_db_server_binding",
    env=ENV,
    driver="django_driver.py",
    done_sql=DONE_SQL,
    age_sql=AGE_SQL,
    workload=WORKLOAD,
    rerun=RERUN,
    extra_env={"CORPUS_DJANGO_BINDING": "server"},
    # Its aged database is the client-binding one's, worked on again with server binding:
    # the same table, the archive built once; pg_stat_statements starts empty in the clone.
    aged_from=CLIENT_BINDING,
)

CLAIM = Claim(
    f"public.{TABLE}",
    (f'from "{TABLE}"', '"status" =', "order by", "for update skip locked"),
    "db_worker's get_locked(): ready() ... select_for_update(skip_locked=True).first()",
)
QUIET = {
    "QA302": "status = 'READY' implies tasks_db_new_ordering_idx's predicate",
    "QA303": "tasks_db_new_ordering_idx (status, priority DESC, run_after, enqueued_at) "
    "supplies the order",
}
SMALL = {
    "QA101": "the table is small: its indexes are far under the 8 MiB minimum",
    "QA201": "50 + 0.2 x 1,200 rows is far under the 50,000 minimum trigger",
}
ARCHIVE = {"QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against a few hundred live"}


def _expect(qa301: Codes) -> Expect:
    return Expect(
        queues={f"public.{TABLE}": Live("status", frozenset({"READY"}))},
        not_queues={"public.django_migrations": "Django's migration history"},
        claims=(CLAIM,),
        not_claims=(),
        codes={
            "fresh": Codes(
                required=qa301.required, forbidden={**QUIET, **SMALL}, info_only=qa301.info_only
            ),
            "aged": Codes(
                required={**ARCHIVE, **qa301.required}, forbidden=QUIET, info_only=qa301.info_only
            ),
        },
        targets={"aged": {"QA201": f"public.{TABLE}"}},
    )


class TestDjangoTasksDb(CorpusSuite):
    library = CLIENT_BINDING
    expect = _expect(
        Codes(
            info_only={
                "QA301": "client-side binding sends 'READY' as a literal; "
                "pg_stat_statements shows it as $1"
            }
        )
    )


class TestDjangoTasksDbServerBinding(CorpusSuite):
    library = SERVER_BINDING
    expect = _expect(
        Codes(
            required={
                "QA301": "status is a bound parameter ($1) and psycopg prepares the "
                "claim: a generic plan cannot use tasks_db_new_ordering_idx"
            }
        )
    )
