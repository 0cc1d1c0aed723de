"""Stage ``generate``: a synthetic IT-support knowledge base, BEIR layout (params ``generate:``).

The catalogue below holds 20 components with two incident *families* each. A
family has two procedures that both resolve its incident and a few
*confusable* documents about the same component but another problem. The
generator picks ``families`` of them, ``confusables_per_family`` confusables per
family and ``generic_docs`` family-less documents (policies, onboarding,
how-tos), then writes ``queries_per_family`` queries per family.

Relevance (``qrels/all.tsv``), per query of family F:

* F's primary procedure: 2, F's alternative procedure: 1 -- exactly two positives,
  graded so that nDCG and friends reward putting the primary fix first;
* F's confusables: 0 (judged non-relevant: the hard negatives we know of);
* everything else: unjudged.

Confusables carry ``metadata.family = F`` so a family split keeps them with F.

Documents. A procedure's text is "<component line> <symptom> <numbered steps>
<another symptom>", with two of F's documentation phrasings of the symptom; a
confusable is "<component line> <its text>". Ids (d001..., q001...) are given
after a seeded shuffle, so they say nothing about relevance.

Difficulty. Each query starts from a symptom phrase. With probability
``difficulty`` it is a *paraphrase* (user words, few shared with the procedures:
a vocabulary gap), otherwise a documentation phrase. Independently, with
probability ``difficulty`` it also mentions the cue words of one of F's
confusables (surface homonymy). difficulty 0 gives queries that share the
documents' words; 1 gives only paraphrased, misleading queries. Query metadata
records ``style`` (lexical | paraphrase) and ``cue`` (the borrowed words or null)
for failure analysis. At the defaults BM25 reaches nDCG@10 of about 0.53
(0.88 at difficulty 0, 0.23 at 1) and all-MiniLM-L6-v2 about 0.69.

Every choice draws from one ``random.Random(seed)`` in catalogue order (no
``hash()``, no set iteration), so a seed gives byte-identical files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from .core.atomic import atomic_path
from .core.config import GenerateParams
from .core.data import Doc, Qrels, Query, write_corpus, write_qrels, write_queries
from .core.errors import InputError

PRIMARY, ALTERNATIVE, CONFUSABLE = 2, 1, 0  # graded relevance written to qrels


@dataclass(frozen=True)
class Procedure:
    title: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Confusable:
    title: str
    text: str
    cue: str  # the words a homonymous query borrows from this document


@dataclass(frozen=True)
class Family:
    id: str
    component: str  # a key of COMPONENTS
    symptoms: tuple[str, ...]  # documentation vocabulary (clauses, lower case, no final stop)
    paraphrases: tuple[str, ...]  # user vocabulary for the same incident
    primary: Procedure
    alternative: Procedure
    confusables: tuple[Confusable, ...]


@dataclass(frozen=True)
class Page:
    title: str
    text: str


@dataclass
class Generated:
    corpus: dict[str, Doc]
    queries: dict[str, Query]
    qrels: Qrels


# ----------------------------------------------------------------------------- catalogue

COMPONENTS: dict[str, str] = {
    "message-queue": "message queue",
    "database-replica": "database replica",
    "tls-certificates": "TLS certificates",
    "dns": "DNS",
    "disk-volumes": "disk volumes",
    "cache-cluster": "cache cluster",
    "load-balancer": "load balancer",
    "cron-scheduler": "cron scheduler",
    "container-registry": "container registry",
    "vpn": "VPN",
    "sso-login": "SSO login",
    "email-relay": "email relay",
    "backups": "backups",
    "ci-runners": "CI runners",
    "kubernetes-nodes": "Kubernetes nodes",
    "object-storage": "object storage",
    "search-cluster": "search cluster",
    "logging-pipeline": "logging pipeline",
    "payment-webhook": "payment webhook",
    "feature-flags": "feature flags",
}

P, C = Procedure, Confusable

FAMILIES: tuple[Family, ...] = (
    # ------------------------------------------------------------------ message queue
    Family(
        "queue-worker-crash", "message-queue",
        ("the queue worker process has crashed and messages are stuck in the pending state",
         "consumers are offline and the pending message count on the queue keeps rising",
         "the worker exited and unacknowledged messages accumulate on the queue"),
        ("orders placed an hour ago still have not been handled and the backlog just keeps growing",
         "nothing in the background jobs is getting picked up since the processing service died",
         "invoices that should go out automatically are waiting forever",
         "the job runner seems dead, tasks pile up and nobody works them off",
         "async tasks are frozen and the to-do list of the backend only gets longer"),
        P("Restart the queue worker and drain pending messages",
          ("Check the worker service status and read the last lines of its crash log.",
           "Restart the consumer with the service manager and confirm it registers on the queue.",
           "Watch the pending message count fall until the backlog is drained.",
           "If the worker crashes again, scale out a second consumer and open an incident.")),
        P("Replay unacknowledged messages with idempotency keys",
          ("Export the unacknowledged messages from the broker to a replay file.",
           ("Confirm every message carries an idempotency key so handlers skip work that already "
            "completed."),
           "Republish the messages to the work queue in small batches.",
           "Compare processed counts with the export before deleting the replay file.")),
        (C("Inspect and purge the dead-letter queue",
           "Messages that exceed the retry limit are routed to the dead-letter queue. Read their "
           "headers to find the rejection reason, fix the producer, then purge the messages or "
           "shovel them back.",
           "dead-letter queue"),
         C("Message TTL and expired messages",
           "A queue policy may set a message time-to-live. Messages older than the TTL are "
           "discarded silently; raise the TTL if producers publish faster than consumers keep up "
           "during peaks.",
           "message TTL"),
         C("Grant a service account access to a queue virtual host",
           "Consumers that connect with a new service account fail with access refused until the "
           "account gets configure, write and read permissions on the virtual host.",
           "virtual host permissions")),
    ),
    Family(
        "queue-publisher-blocked", "message-queue",
        ("the broker raised a memory alarm and publishers are blocked",
         "publish calls hang because the message broker hit its memory high watermark",
         "producers receive connection blocked notifications from the broker"),
        ("the checkout page spins forever when it tries to hand work off to the backend",
         "apps that send events just freeze and then time out, the middleware looks full",
         "our services cannot push anything into the pipeline, every send call hangs",
         "sending a task never returns, as if the post office stopped accepting letters",
         "the web tier stalls whenever it enqueues something"),
        P("Clear a broker memory alarm by draining large queues",
          ("Open the broker management page and find the queues that hold the most memory.",
           ("Start extra consumers for those queues or convert idle ones to lazy queues that page "
            "to disk."),
           ("Wait until memory use drops below the high watermark; the alarm clears and publishers "
            "unblock."),
           "Record which producer flooded the broker.")),
        P("Raise the broker memory high watermark temporarily",
          ("Confirm the host has free RAM headroom.",
           ("Set vm_memory_high_watermark to a higher fraction at runtime with the broker control "
            "tool."),
           "Verify that blocked connections resume publishing.",
           "Revert the setting once the backlog is gone and file a capacity ticket.")),
        (C("Broker disk free limit alarm",
           "When free disk space drops below the disk free limit the broker stops accepting "
           "messages on every node. Clean up old log files or grow the volume that holds the "
           "message store.",
           "disk free limit"),
         C("Publisher confirms and message loss",
           "Enable publisher confirms so producers know when the broker has persisted a message; "
           "without them a broker restart can lose messages in flight.",
           "publisher confirms"),
         C("Connection churn from short-lived publishers",
           "Opening a new connection for every publish wastes broker memory and file descriptors. "
           "Reuse a long-lived connection and a channel pool in each producer.",
           "connection churn")),
    ),
    # ------------------------------------------------------------------ database replica
    Family(
        "replica-lag", "database-replica",
        ("replication lag on the read replica keeps growing",
         "the database replica falls behind the primary and serves stale reads",
         "the replica apply delay exceeds the replication lag alert threshold"),
        ("customers update their profile but the old address keeps showing up for minutes",
         "reports show yesterday's numbers even though new sales were entered",
         "changes I save disappear when I refresh, then come back later",
         "the dashboard trails reality by a good ten minutes",
         "after editing a record the list page still shows the old value"),
        P("Reduce replica lag by stopping heavy readers",
          ("Check seconds behind primary on each read replica.",
           "Find long-running analytic queries on the lagging replica and cancel them.",
           "Move batch report jobs to the dedicated analytics replica.",
           "Confirm that replication lag returns under the alert threshold.")),
        P("Route reads to the primary while a replica catches up",
          ("Mark the lagging replica as unhealthy in the connection pooler.",
           "Let read traffic fall back to the primary database while you watch its CPU.",
           "Re-enable the replica once replication has caught up.",
           "Review whether the replica instance class is too small for the write volume.")),
        (C("Create a new read replica from a snapshot",
           "Provision a read replica by restoring the latest snapshot and attaching it to the "
           "primary; the initial sync of a large database can take hours.",
           "new read replica"),
         C("Replication slot bloat on the primary",
           "An abandoned replication slot keeps write-ahead log segments on the primary forever "
           "and fills its disk. Drop slots that no replica uses.",
           "replication slot"),
         C("Rotate database user passwords",
           "Database credentials of applications are rotated every 90 days through the secrets "
           "manager; replicas pick up the change from the primary.",
           "database password rotation")),
    ),
    Family(
        "primary-db-down", "database-replica",
        ("the primary database is unreachable and a replica must be promoted",
         "database failover is needed because the primary instance crashed",
         "writes fail with read-only transaction errors after the primary database went down"),
        ("nobody can save anything, every form submit errors out but pages still load",
         "the app says the data store is read only and all edits fail",
         "we lost the main data server and the site cannot record new orders",
         "logins work but creating anything returns an error",
         "the whole platform has been in view-only mode since 3am"),
        P("Promote a replica to primary",
          ("Confirm the old primary is really down and fence it so it cannot accept writes.",
           "Promote the most up-to-date replica with the promote command.",
           "Point the write endpoint DNS record at the new primary.",
           "Rebuild the old primary as a replica once it is repaired.")),
        P("Restart the failed primary database in place",
          ("Check the instance console for out-of-memory or storage full events.",
           "Free disk space or add memory, then restart the database service.",
           "Let crash recovery finish and check the log for corrupted pages.",
           "Confirm replicas reconnect and resume streaming from the primary.")),
        (C("Planned switchover for database maintenance",
           "Schedule a switchover in the maintenance window: drain connections, wait for zero lag, "
           "then swap roles so the patched replica becomes primary.",
           "planned switchover"),
         C("Read-only database user for analysts",
           "Analysts get a read-only database user on the reporting replica; request it through "
           "the access portal.",
           "read-only user"),
         C("Database connection limit reached",
           "When max_connections is reached new clients get too many connections errors. Put a "
           "connection pooler in front of the database instead of raising the limit.",
           "too many connections")),
    ),
    # ------------------------------------------------------------------ TLS certificates
    Family(
        "cert-expired", "tls-certificates",
        ("the TLS certificate has expired and clients reject the connection",
         "browsers show a certificate expired warning for the public endpoint",
         "the certificate validity date has passed and TLS handshakes fail"),
        ("visitors get a scary not secure page when they open our website",
         "the padlock in the address bar turned into a red warning this morning",
         "partners say their integration refuses to talk to us because of a security error",
         "Chrome says your connection is not private on our login page",
         "the mobile app stopped connecting after midnight with a trust error"),
        P("Renew an expired TLS certificate with the ACME client",
          ("Run the ACME client renewal for the affected domain.",
           "Complete the DNS or HTTP challenge if it is requested.",
           "Reload the web server or ingress so it serves the new certificate.",
           "Check the new expiry date with openssl s_client.")),
        P("Install a manually issued certificate from the CA portal",
          ("Generate a new private key and a certificate signing request.",
           "Submit the CSR in the CA portal and download the signed certificate with its chain.",
           "Upload the key and the full chain to the load balancer certificate store.",
           "Set a renewal reminder 30 days before the new expiry date.")),
        (C("Incomplete certificate chain",
           "Some clients fail when the server sends only the leaf certificate. Serve the "
           "intermediate certificates in the correct order after the leaf.",
           "intermediate certificate"),
         C("Client certificates for internal services",
           "Internal services authenticate with mutual TLS client certificates issued by the "
           "private CA; request one through the service mesh onboarding form.",
           "client certificate"),
         C("Certificate pinning in the mobile app",
           "The mobile app pins the public key of the API certificate, so changing keys needs a "
           "coordinated app release.",
           "certificate pinning")),
    ),
    Family(
        "cert-hostname-mismatch", "tls-certificates",
        ("the certificate does not match the hostname and TLS verification fails",
         "clients report a hostname mismatch because the subject alternative name is missing",
         "a new subdomain serves a certificate issued for a different domain"),
        ("the new shop address opens with a warning that the site is pretending to be another one",
         "our fresh subdomain shows a security error while the main site is fine",
         "curl complains the name in the cert is wrong for the new api address",
         "the browser says this certificate belongs to some other website",
         "after adding a second web address users see a privacy warning only there"),
        P("Reissue the certificate with the missing subject alternative name",
          ("List the names on the current certificate with openssl x509 -text.",
           "Request a new certificate that includes every hostname as a subject alternative name.",
           "Deploy it and reload the ingress.",
           "Test each hostname with a TLS handshake.")),
        P("Issue a wildcard certificate for the subdomain",
          ("Request a wildcard certificate for the parent domain using a DNS challenge.",
           "Store it as the default certificate on the ingress controller.",
           "Remove the per-host certificate that caused the mismatch.",
           "Remember that a wildcard covers one label only.")),
        (C("Self-signed certificates in development",
           "Local development uses self-signed certificates; add the development CA to your trust "
           "store instead of disabling verification.",
           "self-signed certificate"),
         C("HSTS policy for public domains",
           "Public domains send a Strict-Transport-Security header; dropping HTTPS on a domain "
           "with HSTS breaks browsers for the whole max-age period.",
           "HSTS header"),
         C("Weak cipher suites flagged by the scanner",
           "The security scanner flags old cipher suites and TLS 1.0; switch the ingress TLS "
           "policy to the modern profile.",
           "cipher suites")),
    ),
    # ------------------------------------------------------------------ DNS
    Family(
        "dns-resolution-failure", "dns",
        ("DNS lookups for internal service names fail with SERVFAIL",
         "the internal DNS resolver times out and services cannot resolve hostnames",
         "name resolution inside the cluster is failing"),
        ("services suddenly cannot find each other even though they are all running",
         "every call between our apps says unknown host since lunch",
         "the apps cannot look up where the other apps live",
         "ping by name fails but ping by IP address works",
         "internal addresses stopped working, only raw numbers do"),
        P("Restart the internal DNS resolver pods",
          ("Check the resolver pods for crash loops and high CPU.",
           "Restart them one at a time with a rollout restart.",
           "Run dig against the resolver service IP to confirm answers come back.",
           "Add resolver replicas if the query rate exceeds their capacity.")),
        P("Fail over to the secondary DNS forwarders",
          ("Edit the resolver configuration to forward to the secondary upstream servers.",
           "Lower the negative cache TTL so failed answers expire quickly.",
           "Verify resolution from a debug pod with nslookup.",
           "Open a ticket with the network team about the primary forwarders.")),
        (C("Add a DNS record for a new service",
           ("Request A or CNAME records through the DNS change form; changes propagate within the "
            "record TTL."),
           "new DNS record"),
         C("DNS query logging",
           "Resolver query logs are shipped to the logging pipeline and kept for 14 days; use them "
           "to trace which client asked for a name.",
           "DNS query logs"),
         C("Split-horizon DNS for VPN users",
           "VPN clients resolve internal zones through split-horizon DNS while public names go to "
           "their normal resolver.",
           "split-horizon DNS")),
    ),
    Family(
        "dns-stale-record", "dns",
        ("the DNS record still points to the old IP address after the migration",
         "clients resolve a stale A record and reach the decommissioned server",
         "DNS propagation is incomplete and cached answers return the previous address"),
        ("half our users land on the old server we switched off yesterday",
         "the website moved but some people still see the previous version",
         "after the move to the new host some offices still reach the retired machine",
         "the domain keeps sending traffic to a box that no longer exists",
         "some customers see the old site and some see the new one"),
        P("Correct the record and flush resolver caches",
          ("Verify the authoritative answer with dig against the zone's name servers.",
           "Fix the A record value if it is wrong in the zone.",
           "Flush caches on internal resolvers and ask users to flush their local DNS cache.",
           "Keep the old server answering with a redirect until the old TTL has passed.")),
        P("Lower the TTL and keep both endpoints serving",
          ("Keep the old address serving traffic through a reverse proxy to the new host.",
           "Set the record TTL to 60 seconds.",
           "Wait one full old TTL period before switching off the old server.",
           "Raise the TTL again after the migration settles.")),
        (C("DNSSEC signing for public zones",
           "Public zones are signed with DNSSEC; keys roll over yearly and a broken DS record "
           "makes the whole domain fail validation.",
           "DNSSEC keys"),
         C("Reverse DNS for mail servers",
           "Outbound mail servers need a PTR record that matches their hostname, or receivers may "
           "reject the mail.",
           "PTR record"),
         C("Domain registration renewal",
           "Domains are renewed automatically by the registrar; an expired registration takes the "
           "whole zone offline.",
           "domain registration")),
    ),
    # ------------------------------------------------------------------ disk volumes
    Family(
        "disk-full", "disk-volumes",
        ("the disk volume is full and writes fail with no space left on device",
         "filesystem usage reached 100 percent on the data volume",
         "the application logs no space left on device errors"),
        ("uploads fail and the server says it cannot save anything anymore",
         "the machine ran out of room and the app crashes when it writes",
         "storage on the box is maxed out, nothing new can be stored",
         "saving a file throws an error about the drive being at capacity",
         "the server is stuffed, there is zero room left for data"),
        P("Free space on a full volume",
          ("Run du to find the largest directories on the volume.",
           "Delete rotated logs, old core dumps and temporary files.",
           "Restart services that keep deleted files open so the space is released.",
           "Add log rotation for the directory that grew.")),
        P("Grow a data volume online",
          ("Resize the volume in the cloud console or with the CLI.",
           "Extend the partition with growpart.",
           "Resize the filesystem with resize2fs or xfs_growfs without unmounting.",
           "Confirm the new size with df -h.")),
        (C("Inode exhaustion with many small files",
           "A filesystem can run out of inodes while df still shows free blocks; millions of small "
           "cache files are the usual cause. Check with df -i.",
           "inode usage"),
         C("Snapshot schedule for data volumes",
           "Data volumes are snapshotted nightly and kept for 14 days; ask the storage team for "
           "longer retention.",
           "volume snapshot"),
         C("Mount options for database volumes",
           ("Database volumes use the xfs filesystem mounted with noatime for predictable write "
            "latency."),
           "mount options")),
    ),
    Family(
        "disk-readonly", "disk-volumes",
        ("the volume was remounted read-only after I/O errors",
         "the kernel log shows ext4 errors and the filesystem is now read-only",
         "writes fail with read-only file system on the attached volume"),
        ("the server still answers but refuses to change any file",
         "the drive suddenly behaves like a CD, nothing can be edited",
         "after a hiccup on the host the app can read its data but not update it",
         "every attempt to edit a file says permission denied even as root",
         "system messages show hardware complaints and files became locked"),
        P("Repair the filesystem with fsck",
          ("Stop the services that use the volume and unmount it.",
           "Run fsck on the device and accept the repairs.",
           "Mount it read-write again and check dmesg for new errors.",
           "Restore any damaged files from the latest snapshot.")),
        P("Replace the failing volume from a snapshot",
          ("Create a new volume from the most recent snapshot.",
           "Attach it to the instance and mount it in place of the failing one.",
           "Copy data written since the snapshot from the old volume if it is still readable.",
           "Detach and delete the failing volume.")),
        (C("Disk latency alerts on shared storage",
           "High await times in iostat point to noisy neighbours on shared storage; move the "
           "workload to provisioned IOPS volumes.",
           "disk latency"),
         C("Encrypting a data volume",
           "New volumes are encrypted by default with the platform key; existing volumes must be "
           "copied through an encrypted snapshot.",
           "volume encryption"),
         C("Read-only root filesystem for containers",
           "Containers run with a read-only root filesystem; write temporary files to an emptyDir "
           "mount instead.",
           "read-only root filesystem")),
    ),
    # ------------------------------------------------------------------ cache cluster
    Family(
        "cache-evictions", "cache-cluster",
        ("the cache cluster reached maxmemory and is evicting keys",
         "the cache hit rate dropped sharply and evictions spiked",
         "Redis memory is full and keys are evicted before they expire"),
        ("pages that were instant now take seconds and the database is being hammered",
         "the speed-up layer seems to forget everything right away",
         "load on the main database doubled although traffic is normal",
         "everything got slow and the stored shortcuts keep getting thrown away",
         "our quick lookups miss all the time now"),
        P("Scale out the cache cluster",
          ("Check used memory and the eviction counter with INFO memory and INFO stats.",
           "Add shards to the cluster and rebalance the hash slots.",
           "Watch the hit rate recover over the next hour.",
           "Update the capacity plan.")),
        P("Find and expire oversized keys",
          ("Scan for the biggest keys with redis-cli --bigkeys.",
           "Set expirations on keys that were written without a TTL.",
           "Shorten the TTL of large, low-value entries.",
           "Fix the code path that writes keys without expiry.")),
        (C("Cache stampede on popular keys",
           "When a hot key expires many requests rebuild it at once; use request coalescing or "
           "early recomputation.",
           "cache stampede"),
         C("Redis persistence settings",
           "The cache cluster runs without AOF persistence, so a restart starts with a cold cache; "
           "that is expected.",
           "Redis persistence"),
         C("Cache key naming scheme",
           ("Prefix cache keys with the service name and a version so a deploy can invalidate them "
            "safely."),
           "cache key naming")),
    ),
    Family(
        "cache-connection-timeouts", "cache-cluster",
        ("clients time out when connecting to the cache cluster",
         "the cache connection pool is exhausted and requests fail with timeouts",
         "Redis refuses connections because maxclients was reached"),
        ("the app throws errors about not being able to reach the fast storage layer",
         "every few minutes requests hang and then fail with a waited-too-long error",
         "the service cannot talk to its in-memory store under load",
         "session data cannot be fetched so users get logged out at random",
         "requests stall for exactly two seconds and then error"),
        P("Raise maxclients and fix connection pooling",
          ("Compare connected_clients with maxclients.",
           "Make each service reuse a bounded connection pool instead of connecting per request.",
           "Raise maxclients if the node has memory headroom.",
           "Restart the worst offending service.")),
        P("Fail over to a healthy cache replica",
          ("Identify the overloaded primary shard in the cluster status.",
           "Trigger a manual failover to its replica.",
           "Confirm clients reconnect to the new primary.",
           "Investigate the slow log of the old primary.")),
        (C("Slow commands blocking the cache",
           "A KEYS or large SORT command blocks the single-threaded server; find them with SLOWLOG "
           "GET and replace them with SCAN.",
           "slow log"),
         C("TLS for cache connections",
           ("Cache clients connect over TLS on port 6380; plain connections on port 6379 are "
            "closed."),
           "cache TLS port"),
         C("Session store migration to the cache",
           "User sessions are moving from the database to the cache cluster; expect one forced "
           "logout during the cut-over.",
           "session store migration")),
    ),
    # ------------------------------------------------------------------ load balancer
    Family(
        "lb-502", "load-balancer",
        ("the load balancer returns 502 bad gateway because all targets are unhealthy",
         "health checks fail and the target group has no healthy hosts",
         "the load balancer marks backends unhealthy and drops requests"),
        ("the website shows a bare error page from the front door while the servers look fine",
         "users get an error page saying the upstream misbehaved",
         "the front end gives a gateway error for every request",
         "the site is down with a generic proxy error but our app logs are quiet",
         "traffic never reaches our servers, they sit idle while customers see errors"),
        P("Fix failing load balancer health checks",
          ("Open the target group and read the health check failure reason.",
           "Call the health check path directly on a backend to see its status code.",
           "Correct the path or port, or fix the dependency that makes the check fail.",
           "Wait for the targets to turn healthy.")),
        P("Register fresh instances behind the load balancer",
          ("Launch replacement instances from the current image.",
           "Register them in the target group.",
           "Deregister the broken instances after connection draining.",
           "Keep one broken instance aside for debugging.")),
        (C("Web application firewall rules",
           "The WAF in front of the load balancer blocks common injection patterns; report false "
           "positives to the security team.",
           "WAF rule"),
         C("Load balancer access logs",
           "Access logs are written to object storage every five minutes; query them to trace a "
           "request by its ID.",
           "access logs"),
         C("Idle timeout for long uploads",
           "Uploads that exceed the 60 second idle timeout are cut off; raise the timeout on the "
           "listener of the upload route.",
           "idle timeout")),
    ),
    Family(
        "lb-uneven-traffic", "load-balancer",
        ("the load balancer sends most traffic to a single backend",
         "uneven load distribution overloads one target while the others are idle",
         "one instance receives far more connections than the rest of the target group"),
        ("one server is on fire while its twins are doing nothing",
         "a single machine in the group is at full CPU and the others are bored",
         "requests pile onto the same box every time",
         "only one of our web servers is ever busy",
         "the work is not being shared fairly between our machines"),
        P("Switch the balancing algorithm to least outstanding requests",
          ("Open the target group attributes.",
           "Change the algorithm from round robin to least outstanding requests.",
           "Enable slow start so new targets warm up gradually.",
           "Compare request counts per target after ten minutes.")),
        P("Remove session stickiness and drain the hot target",
          ("Check whether stickiness is enabled on the target group.",
           "Disable stickiness or shorten the cookie duration.",
           "Drain the overloaded target so its long-lived connections rebalance.",
           "Register it again and watch the request count per target.")),
        (C("Listener rules for path-based routing",
           ("Route /api and /static to different target groups with listener rules ordered by "
            "priority."),
           "listener rules"),
         C("Pre-warming before traffic spikes",
           "Ask the cloud team to pre-warm the load balancer before marketing campaigns that "
           "expect traffic spikes.",
           "pre-warming"),
         C("Static IP addresses for partners",
           ("Partners that allowlist IP addresses get the static addresses of the network load "
            "balancer."),
           "static IP addresses")),
    ),
    # ------------------------------------------------------------------ cron scheduler
    Family(
        "cron-missed-run", "cron-scheduler",
        ("the cron job did not run at its scheduled time",
         "a scheduled task was skipped and no execution appears in the scheduler history",
         "the nightly cron schedule missed its run"),
        ("the report that arrives every morning at 7 never came today",
         "the nightly cleanup just did not happen",
         "our automatic midnight export produced nothing last night",
         "the timed task that should fire every hour has been silent",
         "nothing kicked off the overnight batch"),
        P("Check the scheduler and rerun the missed job",
          ("Confirm the scheduler service is running and its clock is in sync.",
           "Look at the job history for an error or a disabled flag.",
           "Trigger the job manually for the missed interval.",
           "Enable missed-run alerts for the job.")),
        P("Fix the cron expression and timezone",
          ("Print the next run times of the expression with the scheduler's dry run.",
           "Check the timezone: the scheduler runs in UTC unless the job sets one.",
           "Correct the expression, for example a day of week that is off by one.",
           "Deploy and verify the next planned run time.")),
        (C("Overlapping runs of long jobs",
           "If a run lasts longer than its interval the next run starts on top of it; set the "
           "concurrency policy to Forbid or take a lock.",
           "overlapping runs"),
         C("Job output mail from cron",
           ("Cron mails job output to the owner; redirect output to the logging pipeline to stop "
            "the noise."),
           "cron output mail"),
         C("Migrating crontabs to the central scheduler",
           "Server crontabs are being retired; move each entry to the central scheduler with an "
           "owner and an alert.",
           "crontab migration")),
    ),
    Family(
        "cron-job-hung", "cron-scheduler",
        ("a scheduled job has been running for hours and never finishes",
         "the cron job is hung and blocks later runs",
         "the batch job exceeded its timeout but the process is still alive"),
        ("the overnight batch is still going at lunchtime",
         "something kicked off last night and is still spinning",
         "a routine task is frozen and nothing else in its line can start",
         "the daily import never ends",
         "our nightly process is stuck at 99 percent forever"),
        P("Kill the hung job and release its lock",
          ("Find the job's process or pod and take a thread dump for later analysis.",
           "Kill it and delete the lock entry it holds.",
           "Start the next run manually and watch it complete.",
           "Attach the dump to a ticket for the job owner.")),
        P("Add a deadline and heartbeat to the job",
          ("Set activeDeadlineSeconds or a timeout wrapper on the job.",
           "Make the job write a heartbeat every minute.",
           "Alert when the heartbeat is older than five minutes.",
           "Redeploy the job with the new limits.")),
        (C("Resource limits for scheduled jobs",
           "Scheduled jobs get 1 CPU and 2 GiB of memory by default; request more in the job spec.",
           "resource limits"),
         C("Retry policy for failed jobs",
           "Failed runs retry three times with backoff; set backoffLimit to zero for jobs that "
           "must never run twice.",
           "retry policy"),
         C("Ownership labels on scheduled jobs",
           "Every scheduled job needs owner and team labels so alerts reach the right people.",
           "owner labels")),
    ),
    # ------------------------------------------------------------------ container registry
    Family(
        "registry-pull-unauthorized", "container-registry",
        ("pods are in ImagePullBackOff because the container registry returns unauthorized",
         "image pulls from the registry fail with authentication errors",
         "the registry pull secret has expired and image pulls are denied"),
        ("new deployments never start, they just sit there waiting to download",
         "the cluster cannot fetch our app packages anymore",
         "fresh pods hang and complain they are not allowed to get the build",
         "rollouts are stuck because the servers cannot grab the new version",
         "deploys fail right at the start with access denied"),
        P("Refresh the registry pull secret",
          ("Create a new robot token in the registry with pull permission.",
           "Update the imagePullSecret in every affected namespace.",
           "Delete the failing pods so they pull again with the new secret.",
           "Set a calendar reminder before the token expires.")),
        P("Mirror the image to the cluster-local registry",
          ("Copy the image to the cluster-local mirror with crane or skopeo.",
           "Point the deployment at the mirrored image reference.",
           "Roll out and confirm the pods start.",
           "Switch back once the main registry credentials are fixed.")),
        (C("Image vulnerability scanning",
           "Pushed images are scanned; critical CVEs block promotion to production tags.",
           "vulnerability scan"),
         C("Immutable release tags",
           "Release tags are immutable; push a new tag instead of overwriting an existing one.",
           "immutable tags"),
         C("Naming repositories in the registry",
           "Repositories are named team/service; create one through the self-service form.",
           "repository naming")),
    ),
    Family(
        "registry-storage-full", "container-registry",
        ("pushes to the container registry fail because its storage is full",
         "the registry quota is exceeded and image uploads are rejected",
         "registry garbage collection has not run and blob storage filled up"),
        ("the build finishes but uploading the result fails at the very end",
         "CI cannot publish new versions of our app, the upload step errors",
         "the place where builds are kept is out of room",
         "pipelines fail on the last step with a size error",
         "we cannot ship the new build because saving it fails"),
        P("Run registry garbage collection",
          ("Put the registry in read-only mode.",
           "Run garbage collection to delete unreferenced blobs.",
           "Take the registry out of read-only mode.",
           "Schedule garbage collection weekly.")),
        P("Add retention policies to delete old tags",
          ("Define a retention policy that keeps the last 20 tags per repository.",
           "Exclude release tags from the policy.",
           "Run the policy once manually and check the freed storage.",
           "Raise the project quota only if the retained images still do not fit.")),
        (C("Signing images",
           ("Images are signed in CI; the admission controller rejects unsigned images in "
            "production."),
           "image signing"),
         C("Registry replication to a second region",
           ("The registry replicates repositories to a second region every 15 minutes for disaster "
            "recovery."),
           "registry replication"),
         C("Base image updates",
           "Base images are rebuilt weekly; pull the new digest to pick up security patches.",
           "base image")),
    ),
    # ------------------------------------------------------------------ VPN
    Family(
        "vpn-cannot-connect", "vpn",
        ("the VPN client fails to connect with a TLS handshake timeout",
         "remote users cannot establish a VPN tunnel to the gateway",
         "VPN authentication fails for all users"),
        ("working from home I cannot get onto the company network at all",
         "the remote access app keeps spinning and then gives up",
         "staff outside the office cannot reach anything internal",
         "the little shield app says it cannot reach the server",
         "nobody at home can log on to work systems today"),
        P("Restart the VPN gateway service",
          ("Check the gateway dashboard for active tunnels and error counts.",
           "Restart the VPN service on the gateway during a quiet minute.",
           "Confirm that new tunnels establish and authentication succeeds.",
           "Check whether the gateway certificate or RADIUS secret changed.")),
        P("Move users to the backup VPN gateway",
          ("Publish the backup gateway address in the client profile.",
           "Push the profile to managed laptops.",
           "Ask users to reconnect and pick the backup gateway.",
           "Investigate the primary gateway without time pressure.")),
        (C("Install the VPN client on a new laptop",
           "Install the VPN client from the software centre, sign in once on the office network "
           "and the profile is downloaded automatically.",
           "VPN client install"),
         C("VPN access for contractors",
           ("Contractors get VPN access through a sponsor request; accounts expire with the "
            "contract."),
           "contractor access"),
         C("Idle disconnects of VPN sessions",
           "VPN sessions disconnect after 8 hours idle; reconnect to continue working.",
           "idle disconnect")),
    ),
    Family(
        "vpn-slow", "vpn",
        ("VPN connections are established but throughput is very slow",
         "packet loss and MTU fragmentation on the VPN tunnel",
         "large transfers over the VPN stall while small requests work"),
        ("I am connected from home but opening shared files takes forever",
         "video calls are fine but downloading anything internal crawls",
         "remote desktop freezes whenever I am on the work connection",
         "big files never finish copying when I work remotely",
         "the office network is painfully sluggish from home"),
        P("Lower the VPN tunnel MTU",
          ("Test the path MTU with ping and the do-not-fragment flag.",
           "Set the tunnel MTU to 1380 in the client profile.",
           "Enable MSS clamping on the gateway.",
           "Ask affected users to reconnect and repeat a large transfer.")),
        P("Enable split tunnelling for internet traffic",
          ("Route only internal subnets through the tunnel.",
           "Send video calls and public internet traffic directly.",
           "Push the profile and verify routes with the client diagnostics.",
           "Document the change for the security team.")),
        (C("VPN client logs for support tickets",
           "Export the VPN client log from the tray menu and attach it to the support ticket.",
           "client log"),
         C("Always-on VPN for managed laptops",
           ("Managed laptops connect to the VPN automatically before login; it cannot be turned "
            "off by users."),
           "always-on VPN"),
         C("Site-to-site VPN with partners",
           ("Partner networks connect through site-to-site IPsec tunnels managed by the network "
            "team."),
           "site-to-site tunnel")),
    ),
    # ------------------------------------------------------------------ SSO login
    Family(
        "sso-saml-error", "sso-login",
        ("single sign-on fails with an invalid SAML assertion error",
         "the identity provider rejects the login because of clock skew",
         "SAML responses fail signature validation after the certificate rollover"),
        ("everybody gets bounced back to the login screen with a cryptic message",
         "clicking the company login button shows an error instead of letting me in",
         "I type my password and then land on an error page from the login service",
         "staff cannot get into any internal tools through the central sign-in",
         "the one-click login to our apps broke for the whole team"),
        P("Update the identity provider signing certificate",
          ("Download the new signing certificate from the identity provider metadata.",
           "Upload it to every service provider that still trusts the old one.",
           "Test a login on each application.",
           "Remove the old certificate after the rollover window.")),
        P("Fix clock skew on the service provider",
          ("Compare the server time with an NTP source.",
           "Restart the time sync service and correct the clock.",
           "Allow a small skew tolerance in the SAML settings.",
           "Retry the login and check the assertion timestamps.")),
        (C("Add a new application to SSO",
           "Register the application in the identity provider, exchange metadata and assign the "
           "user groups that may sign in.",
           "new application"),
         C("SCIM user provisioning",
           ("Accounts are created in applications through SCIM provisioning when a user joins a "
            "group."),
           "SCIM provisioning"),
         C("SSO session lifetime",
           ("An SSO session lasts 12 hours; applications may ask for a fresh login for sensitive "
            "actions."),
           "session lifetime")),
    ),
    Family(
        "sso-account-locked", "sso-login",
        ("the account is locked after repeated failed multi-factor authentication attempts",
         "the identity provider locked the user out after MFA failures",
         "login returns account locked for the user"),
        ("I got a new phone and now I cannot get past the code step",
         "it says I tried too many times and now I am blocked",
         "my authenticator app shows codes that never work",
         "I am shut out of my work account after fumbling the six digits",
         "the second login step rejects me and now I am barred"),
        P("Unlock the account and reset MFA",
          ("Verify the user's identity with a video call or their manager.",
           "Unlock the account in the identity provider admin console.",
           "Reset the MFA factors so the user can enrol the new device.",
           "Ask the user to sign in and enrol again.")),
        P("Issue a temporary access pass",
          ("Verify the user's identity.",
           "Create a temporary access pass valid for one hour.",
           "Let the user sign in with the pass and register a new authenticator.",
           "Check the sign-in log for further failures.")),
        (C("Password policy",
           "Passwords need at least 14 characters and no longer expire on a schedule.",
           "password policy"),
         C("Login audit reports",
           "Security reviews the login audit report monthly for unusual sign-in locations.",
           "login audit"),
         C("Disabling accounts at offboarding",
           "HR triggers offboarding; the account is disabled on the last working day and deleted "
           "after 30 days.",
           "offboarding")),
    ),
    # ------------------------------------------------------------------ email relay
    Family(
        "email-queue-stuck", "email-relay",
        ("outbound emails are stuck in the mail relay queue",
         "the SMTP relay defers messages and the mail queue keeps growing",
         "notification emails are not delivered and the relay shows deferred mail"),
        ("customers never get their password reset messages",
         "our order confirmations have stopped arriving in people's inboxes",
         "nobody receives the automatic notices from the app",
         "sign-up confirmation letters never show up",
         "alerts to users are silently not going out"),
        P("Flush the relay queue after fixing the upstream",
          ("Read the deferral reason in the relay log.",
           "Fix the upstream problem, such as expired smarthost credentials or a full disk.",
           "Flush the queue so deferred mail is retried now.",
           "Watch the queue size drop to zero.")),
        P("Route mail through the backup email provider",
          ("Switch the relay transport to the backup provider.",
           "Requeue the deferred messages.",
           "Confirm delivery with a test to an external mailbox.",
           "Switch back after the primary provider recovers.")),
        (C("Mail relay TLS requirements",
           "The relay accepts submissions only over STARTTLS on port 587 with authentication.",
           "STARTTLS"),
         C("Attachment size limit",
           ("The relay rejects messages larger than 25 MB; share large files through a link "
            "instead."),
           "attachment size"),
         C("Shared mailbox requests",
           ("Request a shared mailbox for a team through the service desk; owners manage its "
            "members."),
           "shared mailbox")),
    ),
    Family(
        "email-blocklisted", "email-relay",
        ("the relay IP address is on a blocklist and mail is rejected as spam",
         "recipient servers reject our email with a 550 blocklisted error",
         "the delivery rate dropped because outgoing mail lands in spam folders"),
        ("our newsletters end up in the junk folder for most customers",
         "big providers bounce everything we send",
         "people say they found our invoices among the junk",
         "gmail users stopped seeing our mails in their inbox",
         "customers complain our notifications look like scams to their mailbox"),
        P("Request delisting and stop the spam source",
          ("Look up the relay IP on the public blocklists.",
           "Find the compromised account or script that sent the spam and disable it.",
           "Submit delisting requests to each blocklist.",
           "Add rate limits per sender on the relay.")),
        P("Align SPF, DKIM and DMARC for the sending domain",
          ("Add the relay to the SPF record of the sending domain.",
           "Sign outgoing mail with DKIM and publish the public key.",
           "Publish a DMARC policy and read the aggregate reports.",
           "Send a test mail and check the authentication results header.")),
        (C("Unsubscribe handling",
           ("Marketing mail includes a one-click unsubscribe header; requests are processed within "
            "two days."),
           "unsubscribe header"),
         C("Email templates",
           ("Transactional email templates live in the notifications repository and are reviewed "
            "by design."),
           "email templates"),
         C("Inbound mail routing",
           "Inbound mail for support addresses is routed to the ticketing system by the relay.",
           "inbound routing")),
    ),
    # ------------------------------------------------------------------ backups
    Family(
        "backup-failed", "backups",
        ("the nightly backup job failed and no recovery point was created",
         "backup snapshots are missing for the last run",
         "the backup agent reports an error and the backup is incomplete"),
        ("we have no safety copy from last night",
         "the system that saves copies of our data reported a red status",
         "if we lost the data today we could only go back two days",
         "the protection copy of the finance server did not happen",
         "the job that keeps spare copies of our files is failing"),
        P("Rerun the failed backup job",
          ("Read the backup agent log for the failure reason.",
           "Fix the cause, such as a locked file or a full staging disk.",
           "Start the backup job manually and wait for the recovery point.",
           "Verify the recovery point by listing its contents.")),
        P("Fix backup agent credentials and storage target",
          ("Check that the backup vault is reachable from the agent.",
           "Renew the agent's service credentials in the secrets manager.",
           "Test the connection from the backup console.",
           "Run an incremental backup to confirm.")),
        (C("Backup retention periods",
           "Daily backups are kept for 35 days and monthly backups for a year.",
           "retention period"),
         C("Backup encryption keys",
           "Backups are encrypted with a key held in the key management service; losing it makes "
           "backups useless.",
           "encryption key"),
         C("Excluding caches from backups",
           "Exclude cache and temporary directories from backup selections to cut size and time.",
           "backup exclusions")),
    ),
    Family(
        "restore-deleted-data", "backups",
        ("data was deleted and must be restored from backup",
         "a point-in-time restore of the database is required",
         "files need to be recovered from the latest backup snapshot"),
        ("someone wiped a folder by accident and we need it back",
         "a bad script removed customer rows yesterday and we want them back",
         "I overwrote the spreadsheet and need yesterday's version",
         "an intern dropped a table and we have to undo that",
         "we lost a week of uploads to a mistake and want the old copies"),
        P("Point-in-time restore to a new database",
          ("Pick the timestamp just before the deletion.",
           "Restore the database to a new instance at that point in time.",
           "Copy the missing rows back into production.",
           "Delete the temporary instance.")),
        P("Restore files from a backup snapshot",
          ("Find the last snapshot taken before the deletion in the backup console.",
           "Mount the snapshot or start a file-level restore to an alternate path.",
           "Copy the recovered files back and check their owners.",
           "Tell the requester what could not be recovered.")),
        (C("Backup cost reports",
           "Backup storage costs are reported monthly per team.",
           "backup costs"),
         C("Legal hold on backups",
           "Legal can place a hold that stops backups from expiring during an investigation.",
           "legal hold"),
         C("Backing up SaaS tools",
           "Data in SaaS tools is exported weekly by the SaaS backup service.",
           "SaaS backup")),
    ),
    # ------------------------------------------------------------------ CI runners
    Family(
        "ci-jobs-pending", "ci-runners",
        ("CI jobs are stuck in pending because no runners are available",
         "the runner autoscaler does not start new CI runners",
         "pipelines wait in the queue for a free runner"),
        ("my merge request has been waiting for its checks for an hour",
         "builds do not start, they just say waiting",
         "nobody can merge because the tests never begin",
         "the automated checks for pull requests sit idle",
         "our build system has stopped picking up work"),
        P("Restart the CI runner autoscaler",
          ("Check the autoscaler logs for cloud quota or API errors.",
           "Restart the autoscaler service.",
           "Confirm that new runner machines register.",
           "Watch the pending jobs start.")),
        P("Register temporary static CI runners",
          ("Start two large static runner machines from the runner image.",
           "Register them with the shared runner token and the default tags.",
           "Let them work off the pending jobs.",
           "Unregister them when the autoscaler is healthy.")),
        (C("CI cache configuration",
           "Cache dependency folders between jobs with a cache key based on the lock file.",
           "CI cache"),
         C("Runner tags for GPU jobs",
           "Jobs that need a GPU must use the gpu runner tag; they run on a separate pool.",
           "runner tags"),
         C("Pipeline minutes budget",
           ("Each team has a monthly budget of pipeline minutes; usage is shown on the CI "
            "dashboard."),
           "pipeline minutes")),
    ),
    Family(
        "ci-job-oom", "ci-runners",
        ("CI jobs are killed with exit code 137 because the runner ran out of memory",
         "the test job is OOM killed on the CI runner",
         "the build container exceeds its memory limit and the runner kills it"),
        ("the test stage dies halfway without any error message",
         "builds crash at random on the big test suite",
         "our pipeline step just stops with a weird number as the reason",
         "the compile step is terminated out of nowhere",
         "heavy tests keep getting cut off mid-run"),
        P("Increase the CI job memory limit",
          ("Confirm the OOM kill in the job log or runner events.",
           "Raise the memory request and limit of the job with runner variables.",
           "Rerun the job and record its peak memory.",
           "Move the job to the large runner tag if the limit is above the default.")),
        P("Split the test suite across parallel jobs",
          ("Enable test parallelism in the pipeline configuration.",
           "Split test files by timing data.",
           "Check that each shard stays under the memory limit.",
           "Merge the test reports.")),
        (C("CI secrets and masked variables",
           "Store tokens as masked CI variables; they are hidden in job logs.",
           "masked variables"),
         C("Retrying flaky tests",
           "Mark flaky tests and retry them once; a test that fails twice blocks the merge.",
           "flaky tests"),
         C("Runner images and toolchains",
           "Runner images ship the supported compilers and are updated monthly.",
           "runner image")),
    ),
    # ------------------------------------------------------------------ Kubernetes nodes
    Family(
        "node-not-ready", "kubernetes-nodes",
        ("a Kubernetes node is NotReady and its pods are being evicted",
         "the kubelet stopped posting node status",
         "the node condition shows NotReady and workloads are rescheduled"),
        ("one of the cluster machines dropped out and apps keep moving around",
         "a worker box went silent and everything on it restarted elsewhere",
         "services flap because one host in the cluster vanished",
         "the cluster lost a member and some apps are pending",
         "half our containers were kicked off a server that looks dead"),
        P("Cordon, drain and replace the NotReady node",
          ("Cordon the node so no new pods are scheduled on it.",
           "Drain it, respecting pod disruption budgets.",
           "Terminate the instance and let the node group create a replacement.",
           "Check that workloads are running again.")),
        P("Restart the kubelet and container runtime",
          ("Connect to the node through the serial console.",
           "Restart the container runtime and then the kubelet.",
           "Check the kubelet log for certificate or disk pressure errors.",
           "Wait for the node to report Ready.")),
        (C("Node pool upgrades",
           "Node pools are upgraded by surge: new nodes join before old ones are drained.",
           "node pool upgrade"),
         C("Taints and tolerations for dedicated nodes",
           "Dedicated nodes carry a taint; only pods with a matching toleration run there.",
           "node taints"),
         C("Node labels for availability zones",
           "Nodes carry zone labels; use topology spread constraints to spread replicas.",
           "zone labels")),
    ),
    Family(
        "pods-unschedulable", "kubernetes-nodes",
        ("pods are pending with insufficient cpu and the cluster autoscaler does not add nodes",
         "the scheduler cannot place pods because nodes lack allocatable resources",
         "FailedScheduling events report insufficient memory on all nodes"),
        ("new copies of our app never start, they wait for room forever",
         "scaling up does nothing, the extra instances are stuck waiting",
         "the cluster seems full and will not grow",
         "the deployment says it wants 10 but only 6 are running",
         "there is no space in the cluster for new apps to launch"),
        P("Fix the cluster autoscaler",
          ("Read the autoscaler status config map for scale-up failures.",
           "Raise the node group maximum size or the cloud quota.",
           "Check that pending pods fit on the node instance type.",
           "Watch new nodes join and pods get scheduled.")),
        P("Right-size pod resource requests",
          ("Compare requested and used CPU and memory per deployment.",
           "Lower requests that are far above real usage.",
           "Roll out the change one deployment at a time.",
           "Review requests again after a week.")),
        (C("Pod disruption budgets",
           "Set a pod disruption budget so voluntary evictions keep a minimum number of replicas.",
           "disruption budget"),
         C("Priority classes",
           "Critical workloads use a high priority class and may preempt batch pods.",
           "priority class"),
         C("Namespace resource quotas",
           "Each namespace has a resource quota; ask the platform team to raise it.",
           "resource quota")),
    ),
    # ------------------------------------------------------------------ object storage
    Family(
        "bucket-access-denied", "object-storage",
        ("requests to the object storage bucket fail with 403 access denied",
         "the bucket policy denies the service role",
         "object uploads return AccessDenied after the IAM change"),
        ("the app can no longer save pictures that users upload",
         "downloads of stored documents say forbidden",
         "our export files cannot be written to the cloud folder anymore",
         "attachments fail to open with a not allowed message",
         "the service is refused when it tries to fetch files from the cloud"),
        P("Fix the bucket policy",
          ("Read the denied action and principal in the storage access log.",
           "Add an allow statement for the service role to the bucket policy.",
           "Check that no explicit deny or organisation policy overrides it.",
           "Retry the upload.")),
        P("Reattach the IAM role to the service",
          ("Check which role the service runs with.",
           "Attach the storage access policy to that role or restore the previous role.",
           "Restart the service to pick up fresh credentials.",
           "Verify access with a list and a put request.")),
        (C("Lifecycle rules for old objects",
           ("Lifecycle rules move objects to cold storage after 90 days and delete them after a "
            "year."),
           "lifecycle rules"),
         C("Bucket versioning",
           "Versioning keeps old object versions; enable it for buckets with important documents.",
           "bucket versioning"),
         C("Public buckets are forbidden",
           "Buckets must not be public; serve public files through the CDN instead.",
           "public bucket")),
    ),
    Family(
        "storage-throttling", "object-storage",
        ("object storage returns 503 SlowDown and requests are throttled",
         "the bucket request rate exceeds the per-prefix limit",
         "high latency and throttling errors from object storage"),
        ("image thumbnails load very slowly and some fail",
         "the cloud file store tells us to calm down when we are busy",
         "bulk uploads get rejected during peak hours",
         "media on the site loads in fits and starts",
         "when many users download at once the file service starts refusing"),
        P("Spread object keys across prefixes",
          ("Find the hot prefix in the request metrics.",
           "Add a hash prefix to new object keys.",
           "Migrate the busiest objects to the new layout.",
           "Watch the throttling errors disappear.")),
        P("Add retries with backoff and a CDN",
          ("Enable exponential backoff with jitter in the storage client.",
           "Serve read-heavy objects through the CDN.",
           "Set cache headers on the objects.",
           "Monitor the cache hit ratio.")),
        (C("Storage classes and costs",
           ("Choose the storage class by access pattern; infrequent access is cheaper but charges "
            "per read."),
           "storage class"),
         C("Cross-region replication for buckets",
           "Replicate critical buckets to a second region for disaster recovery.",
           "cross-region replication"),
         C("Multipart upload for large files",
           ("Files above 100 MB must use multipart upload; abort incomplete uploads with a "
            "lifecycle rule."),
           "multipart upload")),
    ),
    # ------------------------------------------------------------------ search cluster
    Family(
        "search-cluster-red", "search-cluster",
        ("the search cluster health is red with unassigned primary shards",
         "Elasticsearch shards are unassigned after a node left the cluster",
         "the search index is unavailable because primary shards are missing"),
        ("the search box on our site returns nothing or errors",
         "finding products by keyword stopped working",
         "the lookup feature in the app is broken for some categories",
         "typing in the search bar shows a server error",
         "half the catalogue cannot be found anymore"),
        P("Reroute unassigned shards",
          ("Run the allocation explain API for an unassigned shard.",
           "Fix the cause, such as a missing node or an allocation filter.",
           "Retry failed allocations with the reroute API.",
           "Wait for cluster health to turn green.")),
        P("Restore the search index from a snapshot",
          ("Close or delete the broken index.",
           "Restore it from the latest snapshot repository.",
           "Reindex documents changed since the snapshot.",
           "Point the alias back at the restored index.")),
        (C("Index templates and mappings",
           "Index templates define field mappings; change them before creating the next index.",
           "index template"),
         C("Relevance tuning for product search",
           "Boost title matches and tune the product search ranking with the relevance team.",
           "relevance tuning"),
         C("Search slow log",
           "The search slow log records queries above 500 ms for later analysis.",
           "search slow log")),
    ),
    Family(
        "search-indexing-blocked", "search-cluster",
        ("indexing fails because the search cluster hit the flood stage disk watermark",
         "indices were set to read-only by the disk watermark",
         "new documents are not indexed and the index block read_only_allow_delete is set"),
        ("new products do not show up in search even hours after we add them",
         "search results are frozen in time and recent items are missing",
         "updates to articles never appear when people look them up",
         "fresh content is not findable although old content is",
         "the catalogue search stopped learning about new items"),
        P("Free disk and remove the index block",
          ("Delete old indices or replicas to free disk space.",
           "Remove the read_only_allow_delete block from the indices.",
           "Resume the indexing pipeline.",
           "Check that new documents appear in search.")),
        P("Add data nodes to the search cluster",
          ("Add data nodes with the same version and settings.",
           "Wait for shards to rebalance onto them.",
           "Remove the index block.",
           "Update the disk usage alert thresholds.")),
        (C("Reindexing with an alias",
           "Reindex into a new index and switch the alias atomically to avoid downtime.",
           "reindex alias"),
         C("Synonyms in the search analyzer",
           "Synonym lists are maintained by the product team and reloaded without a restart.",
           "synonym list"),
         C("Search cluster snapshots",
           "The search cluster takes snapshots every night to the snapshot repository.",
           "snapshot repository")),
    ),
    # ------------------------------------------------------------------ logging pipeline
    Family(
        "logs-missing", "logging-pipeline",
        ("logs are missing in log search because the log shipper stopped forwarding",
         "the logging pipeline has a growing ingestion backlog",
         "log shipper buffers are full and log records are dropped"),
        ("I cannot find anything our service printed after 10 o'clock",
         "the place where we read app output is empty for the last hour",
         "the troubleshooting screens show no recent events",
         "our diagnostics trail stops abruptly this morning",
         "we are flying blind with no recent traces of what the servers did"),
        P("Restart the log shippers and drain their buffers",
          ("Check the shipper pods for buffer overflow and output errors.",
           "Restart the shippers one node at a time.",
           "Watch the buffered records flush to the log store.",
           "Search for recent records to confirm.")),
        P("Scale the log ingestion tier",
          ("Check the ingestion queue lag.",
           "Add ingestion workers.",
           "Raise the log store write capacity if it throttles.",
           "Watch the backlog drain.")),
        (C("Log retention periods",
           "Application logs are kept for 30 days and audit logs for a year.",
           "log retention"),
         C("Structured logging format",
           "Write JSON logs with the standard fields so they can be parsed.",
           "structured logging"),
         C("Masking personal data in logs",
           "Personal data must be masked before logs leave the service.",
           "log masking")),
    ),
    Family(
        "log-volume-spike", "logging-pipeline",
        ("a log volume spike exceeded the daily ingestion quota",
         "one service floods the logging pipeline with debug logs",
         "log ingestion is throttled because the quota was reached"),
        ("our monitoring bill exploded overnight because something is very chatty",
         "one app writes a novel every second and everyone else's output is being cut",
         "the observability vendor says we are over our allowance",
         "a noisy service is drowning out everything else",
         "a chatty deployment is eating the whole budget for records"),
        P("Find the noisy service and lower its log level",
          ("Group ingested volume by service for the last hour.",
           "Set the log level of the top service back to info.",
           "Redeploy or use its runtime log level endpoint.",
           "Confirm the ingestion rate drops.")),
        P("Add a sampling or drop filter in the pipeline",
          ("Add a filter that drops debug records from the noisy service.",
           "Sample repetitive messages to one in a hundred.",
           "Roll out the filter to the log shippers.",
           "Review the filter after the root cause is fixed.")),
        (C("Log-based alerts",
           ("Create alerts on log patterns in the log search; alert on error rates, not single "
            "lines."),
           "log alerts"),
         C("Shipping audit logs to the SIEM",
           "Audit logs are forwarded to the SIEM for the security team.",
           "SIEM forwarding"),
         C("Log parsing rules",
           "Parsing rules extract fields from unstructured logs; test them in the rule editor.",
           "parsing rules")),
    ),
    # ------------------------------------------------------------------ payment webhook
    Family(
        "webhook-signature-invalid", "payment-webhook",
        ("payment webhook signature verification fails after the secret rotation",
         "the webhook endpoint rejects events with an invalid signature",
         "payment provider events return 400 because the webhook signing secret does not match"),
        ("payments go through at the provider but our shop never marks orders as paid",
         "customers are charged yet their orders stay unpaid in our system",
         "the payment company says our server refuses their notifications",
         "money arrives but the order status never updates",
         "paid invoices still show as open"),
        P("Update the webhook signing secret",
          ("Copy the current signing secret from the provider dashboard.",
           "Store it in the secrets manager under the webhook service.",
           "Restart the webhook service.",
           "Send a test event from the dashboard and check it is accepted.")),
        P("Replay failed webhook events",
          ("List failed deliveries in the provider dashboard.",
           "Replay them after the endpoint accepts events again.",
           "Reconcile orders with the provider's payment report.",
           "Mark remaining orders as paid manually if needed.")),
        (C("Refund process",
           "Refunds are issued from the admin panel and reach the customer in five to ten days.",
           "refund process"),
         C("Payment provider API keys",
           "Payment API keys are restricted per service and rotated yearly.",
           "API keys"),
         C("Currency rounding in invoices",
           "Amounts are rounded per line item to the currency's minor unit.",
           "currency rounding")),
    ),
    Family(
        "webhook-duplicates", "payment-webhook",
        ("the payment webhook delivers duplicate events and orders are processed twice",
         "retried webhook deliveries create duplicate payment records",
         "webhook events arrive more than once after endpoint timeouts"),
        ("some customers got two confirmation emails and two shipments",
         "the shop booked the same purchase twice",
         "our books show the same sale counted double",
         "a customer received their parcel twice but paid once",
         "orders get fulfilled two times in a row"),
        P("Deduplicate webhook events by event ID",
          ("Store each processed event ID with a unique constraint.",
           "Skip events whose ID is already stored.",
           "Clean up the duplicate orders that were created.",
           "Keep the IDs for the provider's retry window.")),
        P("Acknowledge webhooks fast and process them asynchronously",
          ("Return 200 as soon as the event is stored.",
           "Process the event from a background queue.",
           "Check that the endpoint answers within the provider timeout.",
           "Watch the retry count fall in the dashboard.")),
        (C("Chargebacks and disputes",
           "Answer disputes with evidence within seven days in the provider dashboard.",
           "chargeback process"),
         C("Testing webhooks locally",
           "Use the provider CLI to forward webhooks to your laptop during development.",
           "local webhook testing"),
         C("Payment methods by country",
           ("Available payment methods differ per country and are configured in the checkout "
            "settings."),
           "payment methods")),
    ),
    # ------------------------------------------------------------------ feature flags
    Family(
        "flag-change-ignored", "feature-flags",
        ("a feature flag change is not taking effect in production",
         "the flag SDK serves stale feature flag values",
         "clients keep evaluating the old feature flag configuration"),
        ("we switched the new checkout off but users still see it",
         "turning the toggle in the dashboard does nothing on the live site",
         "the beta banner will not go away even though we disabled it",
         "a feature we hid yesterday is still visible to customers",
         "the on/off switch for the new menu is ignored"),
        P("Force a flag refresh in the SDK",
          ("Check the SDK's last successful sync time in the service metrics.",
           "Restart the service or trigger the SDK refresh endpoint.",
           "Confirm the new flag value in the evaluation log.",
           "Lower the polling interval if updates are too slow.")),
        P("Check the flag's targeting rules and environment",
          ("Open the flag in the production environment, not staging.",
           "Read the targeting rules in order; an earlier rule may still match the users.",
           "Fix the rule and save.",
           "Evaluate the flag for a test user.")),
        (C("Cleaning up stale flags",
           "Remove flags that have been fully rolled out for 30 days.",
           "stale flags"),
         C("Percentage rollouts",
           "Roll features out to a percentage of users with a stable hash of the user ID.",
           "percentage rollout"),
         C("Flag naming conventions",
           "Name flags team.feature and describe their purpose.",
           "flag naming")),
    ),
    Family(
        "flag-service-down", "feature-flags",
        ("the feature flag service is unreachable and SDKs fall back to default values",
         "flag evaluation times out because the flag server is down",
         "every feature flag returns its default variation"),
        ("suddenly all the new features vanished for everyone",
         "the site reverted to how it looked months ago",
         "every experiment is showing the old version to all users",
         "premium customers lost features they paid for",
         "all our A/B tests flipped to the control group at once"),
        P("Serve flags from the relay proxy cache",
          ("Point the SDKs at the flag relay proxy.",
           "Check that the relay serves its cached flag data.",
           "Restart services whose SDK did not reconnect.",
           "Repoint SDKs when the flag service is back.")),
        P("Set safe defaults and restart the flag server",
          ("Review the default values in code for critical flags.",
           "Restart the flag server and its database connection.",
           "Confirm flags evaluate to their configured values.",
           "Add an alert on flag evaluation errors.")),
        (C("Flag audit log",
           "Every flag change is recorded in the audit log with the author.",
           "flag audit log"),
         C("Experiment analysis",
           "Experiment results are analysed by the data team after two weeks.",
           "experiment analysis"),
         C("Access roles in the flag dashboard",
           "Only maintainers may change production flags; viewers can read them.",
           "dashboard roles")),
    ),
)

# Family-less documents: hand-written pages, and per-component templates.
GENERIC: tuple[Page, ...] = (
    Page("Expense policy for travel",
         "Book travel through the travel portal. Economy class for flights under six hours; keep "
         "receipts and submit expenses within 30 days."),
    Page("Using the password manager",
         "Store every work credential in the company password manager. Share credentials with "
         "colleagues through shared vaults, never by chat or email."),
    Page("Setting up a new laptop",
         "New laptops arrive enrolled in device management. Sign in with your work account, let "
         "the disk encryption finish and install software from the software centre."),
    Page("Incident severity levels",
         "SEV1 is a full outage or data loss, SEV2 a major feature down, SEV3 a degraded service "
         "with a workaround. The severity decides who is paged and how often we update the status "
         "page."),
    Page("Writing a postmortem",
         "Every SEV1 and SEV2 gets a blameless postmortem within five working days: timeline, "
         "impact, root cause, what went well, and action items with owners."),
    Page("On-call handover",
         "At the end of a shift hand over open incidents, silenced alerts and risky changes in the "
         "on-call channel."),
    Page("Code review guidelines",
         "Keep changes small, describe why, and ask for review from a code owner. Reviewers answer "
         "within one working day."),
    Page("Change management",
         "Production changes need a change record with a rollback plan. Standard changes are "
         "pre-approved; others go to the weekly change board."),
    Page("On-call during public holidays",
         ("Holiday on-call is paid extra and scheduled two months ahead; swap shifts in the "
          "scheduling tool.")),
    Page("Security awareness training",
         "Everyone completes security awareness training yearly; the course takes about an hour."),
    Page("Reporting phishing",
         "Forward suspicious mail with the report button. Do not click links or open attachments."),
    Page("Printing in the office",
         "Print to the follow-me queue and release the job with your badge at any printer."),
    Page("Guest Wi-Fi",
         "Guests connect to the guest network with a daily password shown at reception."),
    Page("Booking meeting rooms",
         "Book rooms in the calendar; release rooms you no longer need so others can use them."),
    Page("Software licence requests",
         "Request paid software through the service desk; the owner of the budget approves."),
    Page("Data classification",
         "Data is public, internal, confidential or restricted. Restricted data needs encryption "
         "and access reviews."),
    Page("Handling personal data requests",
         "Requests from customers to see or delete their personal data go to the privacy team "
         "within two days."),
    Page("Using open source libraries",
         "Check the licence of new dependencies; copyleft licences need approval from legal."),
    Page("Architecture decision records",
         "Record significant technical decisions as short ADRs in the repository, with context and "
         "consequences."),
    Page("Naming new services",
         ("Service names are lower case with dashes and describe what the service does, not the "
          "team.")),
    Page("Updating the status page",
         "The incident commander updates the public status page every 30 minutes during "
         "customer-facing incidents."),
    Page("Talking to customers during incidents",
         ("Support uses the prepared templates; engineers do not contact customers directly during "
          "an incident.")),
    Page("Requesting time off",
         "Request time off in the HR system at least two weeks ahead and tell your team."),
    Page("Hardware refresh cycle",
         "Laptops are replaced every four years; request an early replacement if yours is broken."),
    Page("Mobile phones for work",
         ("Work mail on personal phones needs the device management profile, which can wipe work "
          "data only.")),
    Page("Office badge access",
         "Lost badges are blocked by reception; a replacement is issued the same day."),
    Page("Engineering onboarding checklist",
         "In the first week set up your laptop, get repository access, read the architecture "
         "overview and ship a small change."),
    Page("Writing good runbooks",
         "A runbook states the symptom, the checks to confirm it, the fix step by step and how to "
         "verify the fix. Link it from the alert."),
    Page("Alerting principles",
         "Page only for symptoms users notice; send everything else to a ticket queue."),
    Page("Service level objectives",
         ("Each service defines SLOs for availability and latency; the error budget guides release "
          "pace.")),
    Page("Release calendar",
         ("Releases go out Tuesday to Thursday; Friday releases need approval from the release "
          "manager.")),
    Page("Accessibility in internal tools",
         ("Internal tools follow the accessibility guidelines; report problems to the design "
          "system team.")),
)

GENERIC_TEMPLATES: tuple[Page, ...] = (  # {name}: the component's display name
    Page("Requesting access to the {name}",
         "Access to the {name} is granted per team through the access portal. Pick the role you "
         "need, add a business reason, and your manager approves within one working day."),
    Page("Who owns the {name}",
         "The {name} is run by the platform team. Ask questions in the team channel during office "
         "hours; page outside hours only for production impact."),
    Page("Monthly cost report: {name}",
         "Usage of the {name} is billed back to teams every month. The report lists spend per team "
         "and tag; untagged usage is charged to the owning department."),
    Page("Onboarding notes for the {name}",
         "New engineers get read access to the {name} dashboards in their first week. Read the "
         "architecture overview and shadow an on-call shift before making changes."),
)

_AREA = ("Component: {name}.", "Service area: {name}.", "Applies to: {name}.")
_INTRO = ("Use this runbook when {symptom}.", "Symptom: {symptom}.",
          "This procedure applies when {symptom}.", "Follow these steps if {symptom}.")
_ALSO = ("The same fix applies when {symptom}.", "Also seen as: {symptom}.",
         "You may instead notice that {symptom}.")
_FRAMES = ("{S}.", "{S}, how do I fix it?", "How do we recover when {s}?", "What should I do? {S}.",
           "Urgent: {s}.", "{S}. Is there a runbook for this?", "Since this morning {s}.",
           "Help, {s}!")
_HOMONYM = (" Possibly related: {cue}.", " Someone mentioned {cue}, is that it?",
            " Could {cue} be the cause?")
MAX_QUERIES_PER_FAMILY = min(len(f.symptoms) for f in FAMILIES) * len(_FRAMES)


# ----------------------------------------------------------------------------- generation


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _check(params: GenerateParams, source: str | None) -> None:
    limits = {
        "families": (1, len(FAMILIES)),
        "confusables_per_family": (0, min(len(f.confusables) for f in FAMILIES)),
        "generic_docs": (0, len(GENERIC) + len(GENERIC_TEMPLATES) * len(COMPONENTS)),
        "queries_per_family": (1, MAX_QUERIES_PER_FAMILY),
    }
    for name, (low, high) in limits.items():
        value = getattr(params, name)
        if not low <= value <= high:
            raise InputError(f"must be between {low} and {high} (the catalogue's size), "
                             f"got {value}", source, field=f"generate.{name}")
    if not 0.0 <= params.difficulty <= 1.0:
        raise InputError(f"must be in [0, 1], got {params.difficulty}", source,
                         field="generate.difficulty")


def _procedure_text(rng: random.Random, family: Family, procedure: Procedure) -> str:
    area = rng.choice(_AREA).format(name=COMPONENTS[family.component])
    # Two of the family's symptom phrasings, so a documentation-worded query meets both procedures.
    first, second = rng.sample(family.symptoms, 2)
    intro = rng.choice(_INTRO).format(symptom=first)
    also = rng.choice(_ALSO).format(symptom=second)
    steps = " ".join(f"{i}. {step}" for i, step in enumerate(procedure.steps, start=1))
    return f"{area} {intro} {steps} {also}"


def _queries(rng: random.Random, family: Family, confusables: list[Confusable], count: int,
             difficulty: float) -> list[tuple[str, dict]]:
    """``count`` distinct query texts, each with metadata: family, style, borrowed cue (or None)."""
    # Round-robin over shuffled symptom phrasings so a family's queries vary before any repeats.
    pools = {"lexical": list(family.symptoms), "paraphrase": list(family.paraphrases)}
    for pool in pools.values():
        rng.shuffle(pool)
    used: set[tuple[str, str]] = set()
    out = []
    for _ in range(count):
        style = "paraphrase" if rng.random() < difficulty else "lexical"
        pool = pools[style]
        symptom = pool.pop(0)
        pool.append(symptom)
        # Never empty: MAX_QUERIES_PER_FAMILY bounds the uses of each symptom by len(_FRAMES).
        frames = [f for f in _FRAMES if (symptom, f) not in used]
        frame = rng.choice(frames)
        used.add((symptom, frame))
        text = frame.format(S=_capital(symptom), s=symptom)
        cue = None
        if confusables and rng.random() < difficulty:
            cue = rng.choice(confusables).cue
            text += rng.choice(_HOMONYM).format(cue=cue)
        out.append((text, {"family": family.id, "style": style, "cue": cue}))
    return out


def generate(params: GenerateParams, source: str | None = None) -> Generated:
    """Build the knowledge base for ``params`` (see the module docstring for the design).

    ``source`` (the params file) is named in the error when a size exceeds the catalogue.
    """
    _check(params, source)
    rng = random.Random(params.seed)
    families = [FAMILIES[i] for i in sorted(rng.sample(range(len(FAMILIES)), params.families))]

    # Documents are collected under a role key, shuffled, then numbered: ids carry no hint of
    # relevance (trec_eval breaks score ties by doc id).
    docs: list[tuple[tuple, str, str, dict]] = []  # (role key, title, text, metadata)
    family_confusables: dict[str, list[Confusable]] = {}
    for family in families:
        meta = {"family": family.id, "kind": "procedure", "component": family.component}
        for role, procedure in (("primary", family.primary), ("alternative", family.alternative)):
            text = _procedure_text(rng, family, procedure)
            docs.append(((family.id, role), procedure.title, text, dict(meta)))
        chosen = rng.sample(range(len(family.confusables)), params.confusables_per_family)
        picked = [family.confusables[i] for i in sorted(chosen)]
        family_confusables[family.id] = picked
        for j, confusable in enumerate(picked):
            area = rng.choice(_AREA).format(name=COMPONENTS[family.component])
            docs.append(((family.id, "confusable", j), confusable.title,
                         f"{area} {confusable.text}", {**meta, "kind": "confusable"}))
    pool = [(page.title, page.text, "general") for page in GENERIC] + [
        (page.title.format(name=name), page.text.format(name=name), slug)
        for slug, name in COMPONENTS.items() for page in GENERIC_TEMPLATES]
    for k in sorted(rng.sample(range(len(pool)), params.generic_docs)):
        title, text, component = pool[k]
        meta = {"family": None, "kind": "generic", "component": component}
        docs.append((("generic", k), title, text, meta))
    rng.shuffle(docs)

    width = len(str(len(docs)))
    corpus: dict[str, Doc] = {}
    doc_id: dict[tuple, str] = {}
    for number, (key, title, text, meta) in enumerate(docs, start=1):
        did = f"d{number:0{width}d}"
        doc_id[key] = did
        corpus[did] = Doc(did, title, text, meta["family"], meta)

    drafts = []
    for family in families:
        confusables = family_confusables[family.id]
        judged = {doc_id[family.id, "primary"]: PRIMARY,
                  doc_id[family.id, "alternative"]: ALTERNATIVE}
        judged.update({doc_id[family.id, "confusable", j]: CONFUSABLE
                       for j in range(len(confusables))})
        for text, meta in _queries(rng, family, confusables, params.queries_per_family,
                                   params.difficulty):
            drafts.append((text, meta, dict(sorted(judged.items()))))
    rng.shuffle(drafts)

    width = len(str(len(drafts)))
    queries: dict[str, Query] = {}
    qrels: Qrels = {}
    for number, (text, meta, judged) in enumerate(drafts, start=1):
        qid = f"q{number:0{width}d}"
        queries[qid] = Query(qid, text, meta["family"], meta)
        qrels[qid] = judged
    return Generated(corpus, queries, qrels)


def write_generated(out_dir: str | Path, data: Generated) -> None:
    """Write corpus.jsonl, queries.jsonl, qrels/all.tsv; the folder appears whole or not at all."""
    with atomic_path(out_dir, is_dir=True) as tmp:
        write_corpus(tmp / "corpus.jsonl", data.corpus)
        write_queries(tmp / "queries.jsonl", data.queries)
        write_qrels(tmp / "qrels" / "all.tsv", data.qrels)
