package affinity

import (
	"encoding/binary"
	"math"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// rendezvousPick returns the index of the provider a session key belongs to
// by highest-random-weight hashing, or -1 when names is empty. The hash is
// xxhash with its fixed zero seed (not hash/maphash, whose seeds differ per
// process), so every Caddy instance picks the same provider for a key without
// sharing state, and removing a provider only moves the keys it held.
func Pick(key string, names []string) int {
	best, bestScore := -1, uint64(0)
	hk := xxhash.Sum64String(key)
	for i, name := range names {
		if s := rendezvousScore(hk, name); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// rendezvousScore hashes the pair (key hash, name) with xxhash over 16 bytes,
// so the score is a full-strength hash of both and allocates nothing.
func rendezvousScore(hk uint64, name string) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], hk)
	binary.LittleEndian.PutUint64(buf[8:], xxhash.Sum64String(name))
	return xxhash.Sum64(buf[:])
}

// affinityTable remembers which provider last served a conversation, so that
// after a failover the conversation stays where its prompt cache now is. It is
// a bounded LRU with a TTL. Keys are stored as 64-bit xxhash values to bound
// memory whatever the key length; a collision (≈ n²/2⁶⁵) only sends one
// conversation to another's provider. Entries live in one slice linked by
// index, so a full table allocates nothing per put.
type Table struct {
	mu       sync.Mutex
	capacity int
	ttl      time.Duration
	index    map[uint64]int32
	entries  []affinityEntry
	head     int32 // most recently used, -1 when empty
	tail     int32 // least recently used, -1 when empty
	free     int32 // first free slot (linked by next), -1 when none
}

type affinityEntry struct {
	key      uint64
	provider string
	expires  time.Time
	prev     int32
	next     int32
}

// Defaults of NewTable: a prompt cache rarely outlives an hour; 100,000
// sessions take about 5 MB.
const (
	DefaultTTL      = time.Hour
	DefaultCapacity = 100_000
)

// NewTable returns a table of at most capacity entries that forgets
// an entry ttl after it was last put. Zero or negative values take the
// defaults (100,000 entries, 1h).
func NewTable(capacity int, ttl time.Duration) *Table {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	if capacity > math.MaxInt32 {
		capacity = math.MaxInt32
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Table{
		capacity: capacity,
		ttl:      ttl,
		index:    make(map[uint64]int32),
		head:     -1,
		tail:     -1,
		free:     -1,
	}
}

// get returns the provider remembered for key, if any and not expired.
func (t *Table) Get(key string, now time.Time) (provider string, ok bool) {
	h := xxhash.Sum64String(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.index[h]
	if !ok {
		return "", false
	}
	e := &t.entries[i]
	if !now.Before(e.expires) {
		t.remove(i)
		return "", false
	}
	t.moveToFront(i)
	return e.provider, true
}

// put remembers provider for key, refreshing its TTL.
func (t *Table) Put(key, provider string, now time.Time) {
	h := xxhash.Sum64String(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.index[h]; ok {
		e := &t.entries[i]
		e.provider, e.expires = provider, now.Add(t.ttl)
		t.moveToFront(i)
		return
	}
	if len(t.index) >= t.capacity {
		t.remove(t.tail)
	}
	var i int32
	if t.free >= 0 {
		i = t.free
		t.free = t.entries[i].next
	} else {
		t.entries = append(t.entries, affinityEntry{})
		i = int32(len(t.entries) - 1)
	}
	t.entries[i] = affinityEntry{key: h, provider: provider, expires: now.Add(t.ttl), prev: -1, next: t.head}
	if t.head >= 0 {
		t.entries[t.head].prev = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
	t.index[h] = i
}

// forget drops key, e.g. when its provider was removed from the config.
func (t *Table) forget(key string) {
	h := xxhash.Sum64String(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.index[h]; ok {
		t.remove(i)
	}
}

// evictOldest drops the least recently used entry, if any.
func (t *Table) EvictOldest() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tail >= 0 {
		t.remove(t.tail)
	}
}

// size returns the number of entries, expired ones not yet swept included.
func (t *Table) Size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.index)
}

func (t *Table) unlink(i int32) {
	e := &t.entries[i]
	if e.prev >= 0 {
		t.entries[e.prev].next = e.next
	} else {
		t.head = e.next
	}
	if e.next >= 0 {
		t.entries[e.next].prev = e.prev
	} else {
		t.tail = e.prev
	}
}

func (t *Table) moveToFront(i int32) {
	if t.head == i {
		return
	}
	t.unlink(i)
	e := &t.entries[i]
	e.prev, e.next = -1, t.head
	t.entries[t.head].prev = i
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

func (t *Table) remove(i int32) {
	t.unlink(i)
	delete(t.index, t.entries[i].key)
	t.entries[i] = affinityEntry{next: t.free} // drop the provider string for the GC
	t.free = i
}
