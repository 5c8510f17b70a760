/*
 * test_principals.c: principals, roles, separation of duties, quorums and
 * the audit (docs/API.md, "Principals and roles") against a real berthd
 * started with --principals: over TCP with tokens, over the Unix socket as
 * two other Unix users (setpriv, when the test runs as root), and across
 * a kill -9.
 *
 * The principals:
 *   agent  token, submit                  dave   uid 61001, submit
 *   alice  token, approve and resume      carol  uid 61002, approve
 *   bob    token, approve                 ops    token, operate
 *   lead   token, submit and approve
 * and root (the test), berthd's own user: an implicit admin.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pwd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/support.h"
#include "tests/harness/child.h"

#define T_AGENT "agent-0123456789abcdef0123456789abcdef"
#define T_ALICE "alice-0123456789abcdef0123456789abcdef"
#define T_BOB "bob-0123456789abcdef0123456789abcdef01"
#define T_OPS "ops-0123456789abcdef0123456789abcdef01"
#define T_LEAD "lead-0123456789abcdef0123456789abcdef0"
#define T_WORKER "wk-0123456789abcdef0123456789abcdef0123"
#define UID_DAVE 61001
#define UID_CAROL 61002

static const char principals_json[] =
	"{\"principals\": ["
	"{\"name\": \"agent\", \"token\": \"" T_AGENT "\", \"roles\": [\"submit\"]},"
	"{\"name\": \"alice\", \"token\": \"" T_ALICE "\","
	" \"roles\": [\"approve\", \"resume\"]},"
	"{\"name\": \"bob\", \"token\": \"" T_BOB "\", \"roles\": [\"approve\"]},"
	"{\"name\": \"ops\", \"token\": \"" T_OPS "\", \"roles\": [\"operate\"]},"
	"{\"name\": \"lead\", \"token\": \"" T_LEAD "\","
	" \"roles\": [\"submit\", \"approve\"]},"
	"{\"name\": \"dave\", \"uid\": 61001, \"roles\": [\"submit\"]},"
	"{\"name\": \"carol\", \"uid\": 61002, \"roles\": [\"approve\"]},"
	"{\"name\": \"wk\", \"token\": \"" T_WORKER "\", \"roles\": [\"worker\"]}"
	"]}";

struct fx {
	struct harness h;
	char tools[512]; /* the harness keeps pointers to its args */
	char dir[64];
	char file[128];
	char listen[64];
	char where[80];
	int port;
};

static struct fx fx;

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

/* run captures the stdout and stderr of argv (at most size bytes each)
 * and returns its exit status. uid > 0 runs it as that user (and group)
 * through setpriv, with no supplementary groups, and asks again for the
 * SIGKILL at the test's death that the change of user clears (child.h). */
static int run(const char *const *argv, uid_t uid, char *out, char *err,
	       size_t size)
{
	int po[2], pe[2], status;
	const char *av[40];
	char reuid[32], regid[32];
	size_t n = 0, got;
	ssize_t r;
	pid_t pid;

	if (uid > 0) {
		snprintf(reuid, sizeof reuid, "--reuid=%lu", (unsigned long)uid);
		snprintf(regid, sizeof regid, "--regid=%lu", (unsigned long)uid);
		av[n++] = "setpriv";
		av[n++] = reuid;
		av[n++] = regid;
		av[n++] = "--clear-groups";
		av[n++] = "--pdeathsig=KILL";
	}
	for (size_t i = 0; argv[i] && n < 39; i++)
		av[n++] = argv[i];
	av[n] = NULL;
	assert_int_equal(pipe(po), 0);
	assert_int_equal(pipe(pe), 0);
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execvp(av[0], (char *const *)av);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	/* Replies are small: stdout can be read whole before stderr. */
	for (got = 0; got + 1 < size && (r = read(po[0], out + got,
						  size - got - 1)) > 0;)
		got += (size_t)r;
	out[got] = '\0';
	for (got = 0; got + 1 < size && (r = read(pe[0], err + got,
						  size - got - 1)) > 0;)
		got += (size_t)r;
	err[got] = '\0';
	close(po[0]);
	close(pe[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* fx_start starts berthd with the principals above, the principals test
 * tools and --listen; the other users may reach its socket. */
static void fx_start(struct fx *f)
{
	const char *args[] = {"--principals", f->file, "--tools", f->tools,
			      "--listen", f->listen, NULL};

	memset(f, 0, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "/tmp/berth-princ-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->file, sizeof f->file, "%s/principals.json", f->dir);
	write_file(f->file, principals_json, 0600);
	snprintf(f->tools, sizeof f->tools, "%s/../tools-principals",
		 getenv("BERTH_API_TOOLS"));
	f->port = harness_free_port();
	snprintf(f->listen, sizeof f->listen, "127.0.0.1:%d", f->port);
	snprintf(f->where, sizeof f->where, "tcp:127.0.0.1:%d", f->port);
	support_start(&f->h, args);
	/* The harness's folder is 0700; the socket in it is 0666 (berthd
	 * serves other users), so only the folder keeps them out. */
	assert_int_equal(chmod(f->h.dir, 0711), 0);
}

static void fx_cleanup(struct fx *f)
{
	harness_cleanup(&f->h);
	unlink(f->file);
	rmdir(f->dir);
}

/* as connects over TCP and logs in with token. */
static struct berth_client *as(struct fx *f, const char *token)
{
	struct berth_client *c = berth_client_connect(f->where);

	assert_non_null(c);
	assert_int_equal(berth_client_auth(c, token, NULL), 0);
	return c;
}

static const char *reason_of(const json_t *err)
{
	return jstr(json_object_get(err, "data"), "reason");
}

/* refused asserts -32010 with data.reason reason, and that the job is
 * still in status. */
static void refused(struct berth_client *c, const char *method,
		    json_t *params, const char *reason, struct berth_client *r,
		    const char *id, const char *status)
{
	json_t *err = call_err(c, method, params, -32010), *job;

	assert_string_equal(reason_of(err), reason);
	json_decref(err);
	job = call_ok(r, "jobs/get", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(job, "status"), status);
	json_decref(job);
}

static int setup(void **state)
{
	fx_start(&fx);
	return 0;
}

static int teardown(void **state)
{
	fx_cleanup(&fx);
	return 0;
}

/* ---- roles -------------------------------------------------------------- */

/* The "done when": an agent holding a submit token cannot
 * approve, resume or cancel its own job; a person with approve can. */
static void an_agent_with_submit__cannot_approve_resume_or_cancel__alice_can(void **state)
{
	struct berth_client *agent = as(&fx, T_AGENT), *alice = as(&fx, T_ALICE);
	json_t *job = submit(agent, "p-approve", "{}"), *err, *ev;
	char id[40];

	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	assert_string_equal(jstr(job, "submittedBy"), "agent");
	assert_string_equal(jstr(job, "submittedVia"), "tcp");
	json_decref(job);
	err = call_err(agent, "jobs/approve", json_pack("{s:s}", "id", id),
		       -32010);
	assert_string_equal(reason_of(err), "forbidden");
	assert_string_equal(jstr(json_object_get(err, "data"), "principal"),
			    "agent");
	assert_string_equal(jstr(json_object_get(err, "data"), "role"),
			    "approve");
	json_decref(err);
	refused(agent, "jobs/decline", json_pack("{s:s}", "id", id),
		"forbidden", alice, id, "awaiting_approval");
	refused(agent, "jobs/cancel", json_pack("{s:s}", "id", id),
		"forbidden", alice, id, "awaiting_approval");
	refused(agent, "jobs/resume", json_pack("{s:s, s:{}}", "id", id,
						"resumeData"),
		"forbidden", alice, id, "awaiting_approval");
	/* Reading is the agent's: read comes with submit. */
	json_decref(call_ok(agent, "jobs/get", json_pack("{s:s}", "id", id)));

	job = call_ok(alice, "jobs/approve",
		      json_pack("{s:s, s:s}", "id", id, "note", "fine"));
	assert_string_equal(jstr(job, "status"), "pending");
	assert_string_equal(jstr(json_object_get(json_object_get(job, "approval"),
						 "decidedBy"), "name"), "alice");
	assert_string_equal(jstr(json_object_get(json_object_get(job, "approval"),
						 "decidedBy"), "via"), "tcp");
	json_decref(job);
	json_decref(wait_for(alice, id, "completed"));

	/* Every event says who caused it and how. */
	ev = call_ok(alice, "events/poll", json_pack("{s:s, s:i}", "jobId", id,
						     "since", 0));
	{
		json_t *evs = json_object_get(ev, "events"), *e;
		size_t i;
		int seen = 0;

		json_array_foreach(evs, i, e) {
			const char *type = jstr(e, "type");

			if (strcmp(type, "created") == 0) {
				assert_string_equal(jstr(e, "by"), "agent");
				assert_string_equal(jstr(e, "via"), "tcp");
				seen++;
			} else if (strcmp(type, "approved") == 0) {
				assert_string_equal(jstr(e, "by"), "alice");
				assert_string_equal(jstr(e, "via"), "tcp");
				seen++;
			} else if (strcmp(type, "started") == 0 ||
				   strcmp(type, "completed") == 0) {
				assert_string_equal(jstr(e, "by"), "berthd");
				assert_string_equal(jstr(e, "via"), "berthd");
				seen++;
			}
		}
		assert_int_equal(seen, 4);
	}
	json_decref(ev);
	berth_client_close(agent);
	berth_client_close(alice);
}

/* An operator may cancel, but not approve; server/info says who asks. */
static void ops_may_cancel_but_not_approve__and_info_names_the_caller(void **state)
{
	struct berth_client *agent = as(&fx, T_AGENT), *ops = as(&fx, T_OPS);
	json_t *job = submit(agent, "p-approve", "{}"), *info;
	char id[40];

	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	refused(ops, "jobs/approve", json_pack("{s:s}", "id", id), "forbidden",
		agent, id, "awaiting_approval");
	job = call_ok(ops, "jobs/cancel", json_pack("{s:s, s:s}", "id", id,
						    "reason", "not today"));
	assert_string_equal(jstr(job, "status"), "cancelled");
	json_decref(job);
	info = call_ok(ops, "server/info", NULL);
	assert_string_equal(jstr(json_object_get(info, "principal"), "name"),
			    "ops");
	assert_string_equal(jstr(json_object_get(info, "principal"), "via"),
			    "tcp");
	assert_string_equal(json_string_value(json_array_get(json_object_get(
		json_object_get(info, "principal"), "roles"), 1)), "operate");
	json_decref(info);
	/* And a role the agent lacks is refused before params are looked
	 * at: nothing about the job leaks through the error. */
	refused(agent, "tools/pause", json_pack("{s:s}", "name", "p-approve"),
		"forbidden", ops, id, "cancelled");
	berth_client_close(agent);
	berth_client_close(ops);
}

/* ---- separation of duties ------------------------------------------------ */

static void self_approval__is_refused_unless_the_tool_allows_it(void **state)
{
	struct berth_client *lead = as(&fx, T_LEAD);
	json_t *job = submit(lead, "p-approve", "{}"), *err;
	char id[40];

	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	err = call_err(lead, "jobs/approve", json_pack("{s:s}", "id", id),
		       -32010);
	assert_string_equal(reason_of(err), "self_approval");
	assert_string_equal(jstr(json_object_get(err, "data"), "jobId"), id);
	json_decref(err);
	refused(lead, "jobs/decline", json_pack("{s:s}", "id", id),
		"self_approval", lead, id, "awaiting_approval");

	/* A tool that says selfApproval lets its submitter decide. */
	job = submit(lead, "p-self", "{}");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	job = call_ok(lead, "jobs/approve", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);
	berth_client_close(lead);
}

/* A retry is its original's request made again: its submitter stays
 * the original's, so that the one who asked may still not approve it,
 * and who retried is named in its created event. Before, the retrier
 * became the submitter: lead's expired request, retried by ops, could be
 * approved by lead. */
static void a_retried_request__keeps_its_submitter__who_may_not_approve_it(
	void **state)
{
	struct berth_client *lead = as(&fx, T_LEAD), *ops = as(&fx, T_OPS);
	json_t *job, *err, *evs, *ev;
	char id[40], again[40];
	size_t i;

	job = call_ok(lead, "jobs/submit",
		      json_pack("{s:s, s:{}, s:i}", "tool", "p-approve", "input",
				"ttlMs", 100));
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	job = call_ok(lead, "jobs/wait", json_pack("{s:s, s:i, s:[s]}", "id", id,
						   "timeoutMs", 30000, "until",
						   "expired"));
	assert_string_equal(jstr(job, "status"), "expired");
	json_decref(job);

	job = call_ok(ops, "jobs/retry", json_pack("{s:s}", "id", id));
	snprintf(again, sizeof again, "%s", jstr(job, "id"));
	assert_string_equal(jstr(job, "retryOf"), id);
	assert_string_equal(jstr(job, "submittedBy"), "lead");
	json_decref(job);
	err = call_err(lead, "jobs/approve", json_pack("{s:s}", "id", again),
		       -32010);
	assert_string_equal(reason_of(err), "self_approval");
	json_decref(err);
	/* The retry is ops's doing, as its created event says. */
	evs = call_ok(lead, "events/poll", json_pack("{s:s, s:i}", "jobId", again,
						     "since", 0));
	json_array_foreach(json_object_get(evs, "events"), i, ev)
		if (strcmp(jstr(ev, "type"), "created") == 0)
			break;
	assert_true(i < json_array_size(json_object_get(evs, "events")));
	assert_string_equal(jstr(ev, "by"), "ops");
	json_decref(evs);
	berth_client_close(lead);
	berth_client_close(ops);
}

/* ---- quorum ---------------------------------------------------------------- */

/* A tool with quorum 2 runs only after two different people approved;
 * the same approver twice counts once, and is told so. */
static void quorum_2__runs_only_after_two_different_people_approved(void **state)
{
	struct berth_client *agent = as(&fx, T_AGENT), *alice = as(&fx, T_ALICE),
			    *bob = as(&fx, T_BOB);
	json_t *job = submit(agent, "p-quorum", "{}"), *err, *a, *ev, *e;
	char id[40];
	size_t i;
	int partial = 0;

	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	assert_int_equal(json_integer_value(json_object_get(
		json_object_get(job, "approval"), "quorum")), 2);
	json_decref(job);
	job = call_ok(alice, "jobs/approve", json_pack("{s:s, s:s}", "id", id,
						       "note", "one"));
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	a = json_object_get(job, "approval");
	assert_true(json_is_null(json_object_get(a, "decision")));
	assert_int_equal(json_array_size(json_object_get(a, "approvals")), 1);
	assert_string_equal(jstr(json_array_get(json_object_get(a, "approvals"), 0),
				 "by"), "alice");
	assert_string_equal(jstr(json_array_get(json_object_get(a, "approvals"), 0),
				 "note"), "one");
	json_decref(job);

	err = call_err(alice, "jobs/approve", json_pack("{s:s}", "id", id),
		       -32012);
	assert_string_equal(reason_of(err), "already_approved");
	assert_string_equal(jstr(json_object_get(err, "data"), "status"),
			    "awaiting_approval");
	json_decref(err);
	job = call_ok(alice, "jobs/get", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	assert_int_equal(json_array_size(json_object_get(
		json_object_get(job, "approval"), "approvals")), 1);
	json_decref(job);

	job = call_ok(bob, "jobs/approve", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(job, "status"), "pending");
	a = json_object_get(job, "approval");
	assert_string_equal(jstr(a, "decision"), "approved");
	assert_string_equal(jstr(json_object_get(a, "decidedBy"), "name"), "bob");
	assert_int_equal(json_array_size(json_object_get(a, "approvals")), 2);
	assert_true(*jstr(json_array_get(json_object_get(a, "approvals"), 1),
			  "at"));
	json_decref(job);
	json_decref(wait_for(bob, id, "completed"));

	/* The partial approval is an "approved" event that leaves the job
	 * awaiting approval, with how many of how many. */
	ev = call_ok(bob, "events/poll", json_pack("{s:s, s:i}", "jobId", id,
						   "since", 0));
	json_array_foreach(json_object_get(ev, "events"), i, e) {
		if (strcmp(jstr(e, "type"), "approved") != 0 ||
		    strcmp(jstr(e, "status"), "awaiting_approval") != 0)
			continue;
		partial++;
		assert_string_equal(jstr(e, "by"), "alice");
		assert_int_equal(json_integer_value(json_object_get(
			json_object_get(e, "data"), "approvals")), 1);
		assert_int_equal(json_integer_value(json_object_get(
			json_object_get(e, "data"), "quorum")), 2);
	}
	assert_int_equal(partial, 1);
	json_decref(ev);
	berth_client_close(agent);
	berth_client_close(alice);
	berth_client_close(bob);
}

/* approvers names who may decide: another with the approve role is
 * refused, the one named (or an admin, by "role:admin") is not. */
static void approvers__others_with_the_approve_role_are_refused(void **state)
{
	struct berth_client *agent = as(&fx, T_AGENT), *alice = as(&fx, T_ALICE),
			    *bob = as(&fx, T_BOB), *root = support_connect(&fx.h);
	json_t *job = submit(agent, "p-approvers", "{}");
	char id[40];

	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	refused(bob, "jobs/approve", json_pack("{s:s}", "id", id),
		"not_an_approver", bob, id, "awaiting_approval");
	refused(bob, "jobs/decline", json_pack("{s:s}", "id", id),
		"not_an_approver", bob, id, "awaiting_approval");
	job = call_ok(alice, "jobs/decline", json_pack("{s:s, s:s}", "id", id,
						       "reason", "no"));
	assert_string_equal(jstr(job, "status"), "declined");
	assert_string_equal(jstr(json_object_get(json_object_get(job, "approval"),
						 "decidedBy"), "name"), "alice");
	json_decref(job);
	job = submit(agent, "p-approvers", "{}");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	job = call_ok(root, "jobs/approve", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(job, "status"), "pending");
	assert_string_equal(jstr(json_object_get(json_object_get(job, "approval"),
						 "decidedBy"), "via"), "socket");
	json_decref(job);
	berth_client_close(agent);
	berth_client_close(alice);
	berth_client_close(bob);
	berth_client_close(root);
}

/* ---- two Unix users on the socket ---------------------------------------- */

/* dave (uid 61001, submit) and carol (uid 61002, approve) use the berth
 * command on the Unix socket, each as their own Unix user. */
static void socket__two_unix_users_submit_and_approve_by_their_roles(void **state)
{
	const char *berth = getenv("BERTH");
	static char out[65536], err[65536];
	char id[40] = "";
	json_t *job;

	if (geteuid() != 0) {
		print_message("not root: cannot act as other users; skipped\n");
		skip();
	}
	{
		const char *argv[] = {berth, "--socket", fx.h.socket, "--json",
				      "submit", "p-approve", "{}", NULL};

		assert_int_equal(run(argv, UID_DAVE, out, err, sizeof out), 0);
		job = json_loads(out, 0, NULL);
		assert_non_null(job);
		assert_string_equal(jstr(job, "submittedBy"), "dave");
		assert_string_equal(jstr(job, "submittedVia"), "socket");
		snprintf(id, sizeof id, "%s", jstr(job, "id"));
		json_decref(job);
	}
	{
		const char *argv[] = {berth, "--socket", fx.h.socket, "--json",
				      "approve", id, NULL};
		json_t *e;

		/* dave may submit, not approve: berthd refuses (exit 1), and
		 * says why on stderr. */
		assert_int_equal(run(argv, UID_DAVE, out, err, sizeof out), 1);
		e = json_loads(err, 0, NULL);
		assert_non_null(e);
		assert_int_equal(json_integer_value(json_object_get(
			json_object_get(e, "error"), "code")), -32010);
		assert_string_equal(reason_of(json_object_get(e, "error")),
				    "forbidden");
		json_decref(e);
		assert_int_equal(run(argv, UID_CAROL, out, err, sizeof out), 0);
		job = json_loads(out, 0, NULL);
		assert_non_null(job);
		assert_string_equal(jstr(json_object_get(json_object_get(
			job, "approval"), "decidedBy"), "name"), "carol");
		assert_string_equal(jstr(json_object_get(json_object_get(
			job, "approval"), "decidedBy"), "via"), "socket");
		json_decref(job);
	}
	{
		/* A Unix user berthd knows nothing of is refused at once. */
		const char *argv[] = {berth, "--socket", fx.h.socket, "info",
				      NULL};

		assert_int_equal(run(argv, 61003, out, err, sizeof out), 1);
		assert_non_null(strstr(err, "may not use berthd's socket"));
		/* carol's info says who she is. */
		assert_int_equal(run(argv, UID_CAROL, out, err, sizeof out), 0);
		assert_non_null(strstr(out, "carol (socket): read, approve"));
	}
}

/* write_policy writes tool NAME's manifest into dir with policy (JSON). */
static void write_policy(const char *dir, const char *name, const char *policy)
{
	char path[600], text[1024];

	snprintf(path, sizeof path, "%s/%s.json", dir, name);
	snprintf(text, sizeof text,
		 "{\"id\": \"%s\", \"requireApproval\": true, "
		 "\"approvalPolicy\": %s, \"inputSchema\": {\"type\": \"object\"}, "
		 "\"command\": [\"%s/approve.sh\"]}",
		 name, policy, getenv("BERTH_API_TOOLS"));
	write_file(path, text, 0644);
}

/* An approval counts toward the quorum only while the tool's policy
 * lets its approver decide: one given by an approver the policy no longer
 * names, or by the submitter once selfApproval is off, no longer counts,
 * and its approver is refused as any other. Before, a quorum of 2 was met
 * by the one approval given after the change. */
static void approvals__count_only_while_the_policy_lets_their_approver_decide(
	void **state)
{
	struct berth_client *agent, *alice, *lead, *bob;
	char dir[200], saved[512], a[40], b[40], c[40];
	json_t *job, *err;

	snprintf(saved, sizeof saved, "%s", fx.tools);
	snprintf(dir, sizeof dir, "%s/tools-shifting", fx.dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	write_policy(dir, "p-drop", "{\"approvers\": [\"alice\", \"bob\"], "
		     "\"quorum\": 2}");
	write_policy(dir, "p-own", "{\"selfApproval\": true, \"quorum\": 2}");
	write_policy(dir, "p-lower", "{\"approvers\": [\"alice\", \"bob\"], "
		     "\"quorum\": 2}");
	/* The harness keeps a pointer to fx.tools: the restart reads it. */
	snprintf(fx.tools, sizeof fx.tools, "%s", dir);
	assert_int_equal(harness_kill9(&fx.h), 0);
	assert_int_equal(harness_restart(&fx.h), 0);
	assert_int_equal(chmod(fx.h.dir, 0711), 0);

	agent = as(&fx, T_AGENT);
	alice = as(&fx, T_ALICE);
	lead = as(&fx, T_LEAD);
	job = submit(agent, "p-drop", "{}");
	snprintf(a, sizeof a, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(call_ok(alice, "jobs/approve", json_pack("{s:s}", "id", a)));
	job = submit(agent, "p-lower", "{}");
	snprintf(c, sizeof c, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(call_ok(alice, "jobs/approve", json_pack("{s:s}", "id", c)));
	job = submit(lead, "p-own", "{}");
	snprintf(b, sizeof b, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(call_ok(lead, "jobs/approve", json_pack("{s:s}", "id", b)));
	berth_client_close(agent);
	berth_client_close(alice);
	berth_client_close(lead);

	/* alice is no longer among p-drop's approvers; p-own no longer lets
	 * its submitter approve. */
	write_policy(dir, "p-drop", "{\"approvers\": [\"bob\", \"lead\"], "
		     "\"quorum\": 2}");
	write_policy(dir, "p-own", "{\"quorum\": 2}");
	/* p-lower's quorum is now met by alice's approval alone. */
	write_policy(dir, "p-lower", "{\"approvers\": [\"alice\"], "
		     "\"quorum\": 1}");
	assert_int_equal(harness_kill9(&fx.h), 0);
	assert_int_equal(harness_restart(&fx.h), 0);
	assert_int_equal(chmod(fx.h.dir, 0711), 0);

	bob = as(&fx, T_BOB);
	job = call_ok(bob, "jobs/approve", json_pack("{s:s}", "id", a));
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	json_decref(job);
	job = call_ok(bob, "jobs/approve", json_pack("{s:s}", "id", b));
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	json_decref(job);
	alice = as(&fx, T_ALICE);
	err = call_err(alice, "jobs/approve", json_pack("{s:s}", "id", a),
		       -32010);
	assert_string_equal(reason_of(err), "not_an_approver");
	json_decref(err);
	/* Her approval, given again, decides the job: it was "approved
	 * already; it waits for 0 approvals of 1", and nobody could ever
	 * approve it. */
	job = call_ok(alice, "jobs/approve", json_pack("{s:s}", "id", c));
	assert_string_equal(jstr(job, "status"), "pending");
	assert_int_equal(json_array_size(json_object_get(
				 json_object_get(job, "approval"), "approvals")),
			 1);
	json_decref(job);
	lead = as(&fx, T_LEAD);
	err = call_err(lead, "jobs/approve", json_pack("{s:s}", "id", b),
		       -32010);
	assert_string_equal(reason_of(err), "self_approval");
	json_decref(err);
	/* Who may decide still meets the quorum. */
	job = call_ok(lead, "jobs/approve", json_pack("{s:s}", "id", a));
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);
	berth_client_close(alice);
	berth_client_close(lead);
	berth_client_close(bob);

	snprintf(fx.tools, sizeof fx.tools, "%s", saved);
	assert_int_equal(harness_kill9(&fx.h), 0);
	assert_int_equal(harness_restart(&fx.h), 0);
	assert_int_equal(chmod(fx.h.dir, 0711), 0);
}

/* A connection that becomes, by server/auth, a principal without read
 * (a worker) keeps no subscription: before, the stream went on with
 * every job's events, inputs included, which jobs/list then refused. */
static void server_auth__to_a_principal_without_read__ends_its_subscriptions(
	void **state)
{
	struct berth_client *alice = as(&fx, T_ALICE), *agent = as(&fx, T_AGENT);
	json_t *job, *n;
	char id[40], *s;

	json_decref(call_ok(alice, "events/subscribe", json_object()));
	json_decref(submit(agent, "p-approve", "{}"));
	n = berth_client_next_notification(alice, 5000);
	assert_non_null(n); /* the subscription works */
	json_decref(n);
	json_decref(call_ok(alice, "server/auth",
			    json_pack("{s:s}", "token", T_WORKER)));
	job = submit(agent, "p-approve", "{\"secret\": \"s3cr3t\"}");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	/* What was queued before the switch may still come; nothing of the
	 * job submitted after it. */
	while ((n = berth_client_next_notification(alice, 1500))) {
		s = json_dumps(n, JSON_COMPACT);
		assert_null(strstr(s, id));
		free(s);
		json_decref(n);
	}
	berth_client_close(alice);
	berth_client_close(agent);
}

/* ---- the audit across a kill -9 --------------------------------------------- */

/* berth get shows who decided what and when, across a kill -9 and a
 * restart; the events keep who caused them. */
static void the_audit__survives_kill_9(void **state)
{
	struct berth_client *agent = as(&fx, T_AGENT), *alice = as(&fx, T_ALICE),
			    *bob = as(&fx, T_BOB), *c;
	const char *berth = getenv("BERTH");
	static char out[65536], err[65536];
	char id[40], id2[40], token[256];
	json_t *job, *a;

	job = submit(agent, "p-quorum", "{}");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(call_ok(alice, "jobs/approve",
			    json_pack("{s:s, s:s}", "id", id, "note", "ok")));
	job = submit(agent, "p-approve", "{}");
	snprintf(id2, sizeof id2, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(call_ok(bob, "jobs/decline",
			    json_pack("{s:s, s:s}", "id", id2, "reason",
				      "too risky")));
	berth_client_close(agent);
	berth_client_close(alice);
	berth_client_close(bob);

	assert_int_equal(harness_kill9(&fx.h), 0);
	assert_int_equal(harness_restart(&fx.h), 0);
	assert_int_equal(chmod(fx.h.dir, 0711), 0);

	c = as(&fx, T_BOB);
	job = call_ok(c, "jobs/get", json_pack("{s:s}", "id", id));
	a = json_object_get(job, "approval");
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	assert_int_equal(json_array_size(json_object_get(a, "approvals")), 1);
	assert_string_equal(jstr(json_array_get(json_object_get(a, "approvals"), 0),
				 "by"), "alice");
	json_decref(job);
	/* The quorum goes on from where it was: bob's approval is the
	 * second. */
	job = call_ok(c, "jobs/approve", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);
	berth_client_close(c);

	/* berth get, as a person reads it. */
	snprintf(token, sizeof token, "%s/bob-token", fx.dir);
	write_file(token, T_BOB "\n", 0600);
	{
		const char *argv[] = {berth, "--socket", fx.where, "--token-file",
				      token, "get", id2, NULL};

		assert_int_equal(run(argv, 0, out, err, sizeof out), 0);
		assert_non_null(strstr(out, "submitted by     agent (tcp)"));
		assert_non_null(strstr(out, "declined by      bob (tcp) at "));
		assert_non_null(strstr(out, ": too risky"));
	}
	{
		const char *argv[] = {berth, "--socket", fx.where, "--token-file",
				      token, "get", id, NULL};

		assert_int_equal(run(argv, 0, out, err, sizeof out), 0);
		assert_non_null(strstr(out, "required from 2 people; 2 so far"));
		assert_non_null(strstr(out, "approved by      alice (tcp) at "));
		assert_non_null(strstr(out, "approved by      bob (tcp) at "));
		assert_non_null(strstr(out, "decided by       bob (tcp) at "));
	}
	{
		const char *argv[] = {berth, "--socket", fx.where, "--token-file",
				      token, "events", "--job", id2, NULL};

		assert_int_equal(run(argv, 0, out, err, sizeof out), 0);
		assert_non_null(strstr(out, "bob (tcp)"));
		assert_non_null(strstr(out, "agent (tcp)"));
	}
	unlink(token);
}

/* ---- the principals file ---------------------------------------------------- */

/* run_berthd runs berthd with args to its end; its stderr goes to err. */
static int run_berthd(const char *const *args, char *err, size_t size)
{
	static char out[4096];
	const char *argv[24];
	size_t n = 0;

	argv[n++] = getenv("BERTHD");
	for (size_t i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return run(argv, 0, out, err, size);
}

/* A principals file that others may read, or that says something wrong,
 * stops berthd at start with the file, the entry and the field named. */
static void a_principals_file_open_to_others_or_malformed__is_refused_at_start(void **state)
{
	char dir[] = "/tmp/berth-pbad-XXXXXX", file[128], db[160], sock[160];
	static char err[65536];
	const char *args[] = {"--principals", file, "--db", db, "--socket", sock,
			      NULL};
	static const struct {
		const char *json;
		const char *says;
	} bad[] = {
		{"{\"principals\": [{\"name\": \"a\", \"token\": \"" T_AGENT "\","
		 " \"roles\": [\"aprove\"]}]}",
		 "principals[0] (\"a\"): roles[0] is not a role"},
		{"{\"principals\": [{\"name\": \"a\", \"token\": \"" T_AGENT "\","
		 " \"roles\": [\"read\"]}, {\"name\": \"a\", \"uid\": 5,"
		 " \"roles\": [\"read\"]}]}",
		 "principals[1] (\"a\"): name is also principals[0]'s"},
		{"{\"principals\": [{\"name\": \"a\", \"token\": \"" T_AGENT "\","
		 " \"roles\": [\"read\"]}, {\"name\": \"b\", \"token\": \""
		 T_AGENT "\", \"roles\": [\"read\"]}]}",
		 "principals[1] (\"b\"): token is also the token of principals[0]"},
		{"{\"principals\": [{\"name\": \"a\", \"roles\": [\"read\"]}]}",
		 "principals[0] (\"a\"): the entry has no way to authenticate"},
		{"{\"principals\": [{\"name\": \"a\", \"token\": \"x\","
		 " \"roles\": [\"read\"], \"rolez\": 1}]}",
		 "principals[0] (\"a\"): rolez is not a known field"},
		{"{\"principals\": [{\"name\": \"berthd\", \"uid\": 5,"
		 " \"roles\": [\"read\"]}]}",
		 "principals[0]: name is a name berthd gives itself"},
	};

	assert_non_null(mkdtemp(dir));
	snprintf(file, sizeof file, "%s/principals.json", dir);
	snprintf(db, sizeof db, "%s/berth.db", dir);
	snprintf(sock, sizeof sock, "%s/berth.sock", dir);
	write_file(file, principals_json, 0644);
	assert_int_equal(run_berthd(args, err, sizeof err), 1);
	assert_non_null(strstr(err, "is mode 0644: it holds tokens"));
	/* Nothing was started: not even the database was created. */
	assert_int_equal(access(db, F_OK), -1);
	chmod(file, 0640);
	assert_int_equal(run_berthd(args, err, sizeof err), 1);
	assert_non_null(strstr(err, "is mode 0640"));
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_file(file, bad[i].json, 0600);
		assert_int_equal(run_berthd(args, err, sizeof err), 1);
		print_message("berthd said: %s", err);
		assert_non_null(strstr(err, bad[i].says));
	}
	/* A token principal named as berthd's own user, whose socket
	 * connections act as the implicit admin of that name: refused, or
	 * the two would be one person to approvals and the audit. */
	{
		struct passwd *pw = getpwuid(geteuid());
		char json[512], says[160];

		assert_non_null(pw);
		snprintf(json, sizeof json,
			 "{\"principals\": [{\"name\": \"%s\", \"token\": \""
			 T_AGENT "\", \"roles\": [\"submit\"]}]}",
			 pw->pw_name);
		snprintf(says, sizeof says, "principal %s of the principals "
			 "file has the name of Unix user %s", pw->pw_name,
			 pw->pw_name);
		write_file(file, json, 0600);
		assert_int_equal(run_berthd(args, err, sizeof err), 1);
		print_message("berthd said: %s", err);
		assert_non_null(strstr(err, says));
	}
	unlink(file);
	unlink(db);
	rmdir(dir);
}

/* ---- without --principals ----------------------------------------------- */

/* Without --principals today's behaviour stays: berthd's own user is an
 * admin, and may approve the job it submitted; the audit still names
 * it. */
static void without_principals__the_owner_approves_its_own_job(void **state)
{
	struct harness h;
	struct berth_client *c;
	json_t *job, *info;
	char id[40];

	support_start(&h, NULL);
	c = support_connect(&h);
	job = submit(c, "api-approve", "{\"action\": \"go\"}");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	job = call_ok(c, "jobs/approve", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(job, "status"), "pending");
	assert_string_equal(jstr(job, "submittedVia"), "socket");
	assert_string_equal(jstr(json_object_get(json_object_get(job, "approval"),
						 "decidedBy"), "name"),
			    jstr(job, "submittedBy"));
	json_decref(job);
	info = call_ok(c, "server/info", NULL);
	assert_string_equal(json_string_value(json_array_get(json_object_get(
		json_object_get(info, "principal"), "roles"), 0)), "admin");
	json_decref(info);
	berth_client_close(c);
	harness_cleanup(&h);
}

int main(void)
{
	const struct CMUnitTest shared[] = {
		cmocka_unit_test(an_agent_with_submit__cannot_approve_resume_or_cancel__alice_can),
		cmocka_unit_test(ops_may_cancel_but_not_approve__and_info_names_the_caller),
		cmocka_unit_test(self_approval__is_refused_unless_the_tool_allows_it),
		cmocka_unit_test(a_retried_request__keeps_its_submitter__who_may_not_approve_it),
		cmocka_unit_test(quorum_2__runs_only_after_two_different_people_approved),
		cmocka_unit_test(approvers__others_with_the_approve_role_are_refused),
		cmocka_unit_test(socket__two_unix_users_submit_and_approve_by_their_roles),
		cmocka_unit_test(the_audit__survives_kill_9),
		cmocka_unit_test(
			approvals__count_only_while_the_policy_lets_their_approver_decide),
		cmocka_unit_test(
			server_auth__to_a_principal_without_read__ends_its_subscriptions),
	};
	const struct CMUnitTest alone[] = {
		cmocka_unit_test(a_principals_file_open_to_others_or_malformed__is_refused_at_start),
		cmocka_unit_test(without_principals__the_owner_approves_its_own_job),
	};
	int failed = cmocka_run_group_tests_name("principals", shared, setup,
						 teardown);

	return failed + cmocka_run_group_tests_name("berthd alone", alone, NULL,
						    NULL);
}
