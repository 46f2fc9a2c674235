package campaigns

// Internals the external tests (package campaigns_test, which may import
// campaigns/worker) use.
var (
	ReadJSONStrict = readJSONStrict
	ReadRecord     = readRecord
)

// Quiet is the Progress that reports nothing.
type Quiet = quiet

const (
	LockFile    = lockFile
	JournalFile = journalFile
)

// Lookup resolves an RFC 6901 JSON pointer.
var Lookup = lookup
