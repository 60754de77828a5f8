// Package scoring rates how relevant each message of a session is to the
// prompt an agent is working on, so compaction can keep the relevant ones
// and drop or summarize the rest. It takes plain values and returns plain
// values, and imports nothing of ctxd, so that memory can import it.
//
// A score is in [0,1] and is a weighted sum of four components, each in
// [0,1], so that a drop can always be explained (see Explain):
//
//   - Similarity to the prompt. The caller brings each candidate's BM25
//     score and the cosine of its vector with the prompt's. Each side is
//     min-max normalised over the candidates of this query (cosines below 0
//     first clip to 0), then mixed with VectorWeight for the vector side.
//     A side with no spread (every BM25 0, a single candidate, no vectors)
//     carries no information about this prompt: it contributes 0 and the
//     other side takes its share. Similarity is therefore relative: the
//     least similar candidate of a set is at 0 however close it is.
//
//   - Recency: 0.5^(turns back / HalfLifeTurns) from the newest turn. With
//     HalfLife set, also 0.5^(age / HalfLife), and the larger of the two
//     wins: a message is old only when it is old in turns and in time, so
//     a burst of tool calls does not age a minute-old message and a quiet
//     night does not age the last exchange.
//
//   - References: how much later messages refer back to this one. Terms
//     extracts a message's distinctive terms: identifiers (snake_case,
//     camelCase, CONSTANT_CASE, v2, PROJ-123, hex ids, UUIDs), paths, URLs,
//     numbers with three digits, a decimal, a unit or a currency, quoted
//     phrases, and plain words (stemmed for plurals, stopwords out). Each
//     term a later message repeats adds kind weight × idf × gain, where the
//     kind weight ranks how surely a repetition is a reference (identifier,
//     path, URL 1; quote 0.8; number 0.5; word 0.3), idf is normalised to
//     (0,1], and gain grows from 1 for one repeating message towards 2. A
//     later message that contains the message's id adds 3 × gain. The sum
//     x maps to 1-exp(-x/1.5): one identifier repeated once gives about
//     0.5, an id mention about 0.86. Plain words count only when rarer than
//     idf 0.6 (in at most about N^0.4 of N messages: 14 of 800), since in a
//     long session nearly every ordinary word recurs. The idf of code-like
//     terms counts the messages that used the term up to this one, so the
//     message that introduced an identifier gets the credit and more
//     repeats never lower its score; words and numbers, which recur by
//     chance, count the whole session. Only messages with a greater Turn
//     count; those that are not candidates count too. The session is
//     tokenized in one pass (in parallel shards when large) and walked
//     once from the newest message back, so the cost is linear in its
//     terms.
//
//   - Importance: 1 if the message is marked important, else 0. Pinned and
//     system messages are protected before scoring, not scored.
//
// # Defaults
//
// The defaults (weights 0.45 similarity, 0.25 recency, 0.20 references,
// 0.10 importance; VectorWeight 0.2; HalfLifeTurns 24; no time half-life)
// are provisional except VectorWeight. They were set by judgement: similarity
// leads because the prompt is the best evidence of what is needed; recency
// second because agents mostly work on what just happened; references
// third, as indirect evidence; importance last because the flag is rare and
// already protects from most drops. VectorWeight was measured with GloVe on
// LoCoMo dev, evidence in the context window overall (ctxd eval; window
// 4,096, budget 2,048), once the window's own vectors were scored: 0 84.3,
// 0.1 84.4, 0.15 84.8, 0.2 85.6, 0.3 84.2, 0.4 84.0, 0.5 83.2 (runs vary by
// about a point); a stronger embedder deserves more. A half-life of 24 turns keeps the last dozen exchanges near the top. They will be tuned by measurement
// on the evidence-retention benchmark.
//
// The constants inside the references component (kind weights, the rarity
// cut, the saturation scale) are provisional in the same way. On LoCoMo's
// chat (TestLoCoMoReferences) references alone separates evidence turns
// from others with an AUC of about 0.7, but turn length alone does about as
// well there; LoCoMo has almost no identifiers, which is where the
// component is meant to earn its weight.
package scoring
