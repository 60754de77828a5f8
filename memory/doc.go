// Package memory is ctxd's domain: sessions and their messages with exact
// token counts, the budget that turns a window's size into a state, the
// compaction engine, cold storage and recovery, the window builder that
// answers a context call, search, edits, the gateway's conversation
// matching. The offline admin verbs (verify, repair, reindex, export,
// import) are memory/admin, on the same ports. It imports no storage, index,
// HTTP or model library (only scoring, for relevance): the adapters
// implement its interfaces, and internal/server wires them into a Service.
//
// # Ports
//
// What the domain consumes is declared as small interfaces, all in
// ports.go: Store (the system of record: sessions, messages, the change
// log; one transaction per write through SessionTx), Snapshot, Index (full
// text and vectors), Embedder, Tokenizer, the admin checks (DamageScanner,
// StoreChecker, DocLister, ColdAuditor, Progress), Summarizer, EventLog,
// EventReader, ColdMirror, ColdRestorer and WriteKeys. memory/boltstore and
// memory/pgstore are the Stores (memory/storetest is the contract both
// pass), index/ the Index, index/glove and index/openai the Embedders,
// tokenizer/ the Tokenizer, summarize/ the Summarizers, eventlog/ the
// EventLog, coldstore/ the ColdMirror.
//
// internal/memorytest opens a Service on the real adapters in a test's
// temporary directory, with a clock the test moves, and checks the
// service's invariants when the test ends.
//
// # Files by concern
//
//   - The Service and its settings: service.go (Service, Open, Close,
//     readiness), policy.go (Policy and per-session overrides),
//     concurrency.go (Concurrency: the compaction and embedding bounds, and
//     the striped per-session locks), model.go (the stored vectors'
//     model against the configured embedder's), context.go (tenant and request
//     id in the context.Context), error.go (error codes, which httpapi maps
//     to statuses through api/errors.go).
//   - Messages and sessions: message.go (Message, Role, State, validation),
//     session.go (Session, ids, encodings), tokens.go (exact counts),
//     budget.go (Status and window states, the flush signal), pinned.go (the
//     pinned budget), prompt.go (the prompt: counted whole, ranked by a
//     bounded part),
//     messages_service.go (Append, listing), message_lookup.go,
//     sessions_service.go and sessionquery.go (session CRUD and listing),
//     idempotency.go (Idempotency-Key and message_id), edit.go (PATCH and
//     DELETE of a message, versions).
//   - Indexing and search: indexer.go (replays the store's change log into
//     the Index), search.go, salient.go (names an agent reuses), score.go
//     (relevance of the window's messages to a prompt).
//   - Compaction: compact.go (Compact, selection, the hold after a
//     compaction that cannot get under the trigger, and the one-transaction
//     commit), compact_types.go (ColdInfo, reasons),
//     compact_units.go (tool-call groups moved as one unit),
//     compact_prune.go (old tool output cut in the window),
//     compact_summary.go (the rolling summary).
//   - Cold storage and recovery: cold.go, coldsync.go (the JSONL mirror),
//     recover.go (by id), restore_cold.go.
//   - The window builder: window.go (Context, the levels of a conversation's
//     window), window_loop.go (the window of an agent in a tool loop),
//     window_stable.go (the layout kept between calls so the prefix repeats),
//     window_recall.go (the recall block before the newest input),
//     window_chat.go (a conversation's window for the message just stored:
//     the working window whole, what the prompt recalls before that message),
//     window_recover.go (the recovered level: cold originals the prompt asks
//     for) and window_score.go (the window's units scored for the prompt);
//     the builder also uses score.go, compact_prune.go and compact_units.go.
//   - The gateway: gateway.go (session naming, matching a resent history
//     against what is stored, superseding, the flush turn), gateway_models.go
//     (known models' windows), gateway_cache.go (the provider's prompt cache
//     figures per session, and over a tenant's sessions). httpapi speaks the providers' wire formats.
//   - Events and history: events.go, history.go (the event log read back as
//     typed series for the dashboard).
//   - Admin, offline on a closed server's data dir, is its own package,
//     memory/admin (verify, repair, reindex, export, import and the export
//     format); it reaches the domain through exported helpers: CatchUpIndex,
//     RebuildIndex, ScanMessages, CompareMirror, Mirrored, VisitSessions.
//
// # A write
//
// POST /v1/sessions/{id}/messages reaches Service.AppendWith
// (messages_service.go): it validates the batch, answers a replayed
// Idempotency-Key from the store, skips messages whose message_id the
// session holds, then prepare counts each message's tokens and embeds it
// (outside any transaction), and Store.Write commits the messages, the
// session's counts and totals and the write key in one transaction. The
// indexer (indexer.go) brings the Index up to the write's place in the
// store's change log before the call answers. afterAppend then reads the
// session's state (budget.go): past the compaction trigger it compacts
// before answering (the answer carries the report), and it records that
// the agent was told to flush (flush_prompt) once per compaction cycle.
//
// # A context call
//
// POST /v1/sessions/{id}/context reaches Service.Context (window.go): under
// the session's lock (concurrency.go) it compacts first if the window is over
// the hard limit, then a windowBuilder takes the pinned messages, and
// either builds a tool loop's window (window_loop.go), or a conversation's
// cache-stable window for the message just stored (window_chat.go), or takes the recent
// turns, scores the rest against the prompt (window_score.go), takes the summary,
// finds cold originals worth recovering (window_recover.go), fills the remaining
// budget by score, and assembles the messages in order, keeping tool-call
// groups whole (compact_units.go) and cutting old tool output
// (compact_prune.go). What it recovered is committed to the store; if that carried the window past the
// trigger, a compaction follows.
package memory
