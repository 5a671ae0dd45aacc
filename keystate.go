package llmhedge

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"
)

// keyFingerprint names a key in the admin view, the metrics and the state.
func keyFingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// keyState is the shared state of one key of one provider: atomics only.
type keyState struct {
	fp        string
	disabled  atomic.Bool  // 401/403: until an admin reset or a reload
	coolUntil atomic.Int64 // 429: unix nanos
	inFlight  atomic.Int64
	awaiting  atomic.Int64 // attempts sent with the key, their response not yet in
	sent      atomic.Int64 // attempts sent with the key, ever: their order
	reqLeft   atomic.Int64 // rateLimitUnset when unknown
	reqReset  atomic.Int64
	tokLeft   atomic.Int64
	tokReset  atomic.Int64
	// reserve is the quota_reserve of the key's provider, so that the
	// admin view and the gauge judge the key as routing does.
	reserve atomic.Int64
}

func newKeyState(fp string) *keyState {
	ks := &keyState{fp: fp}
	ks.reqLeft.Store(rateLimitUnset)
	ks.tokLeft.Store(rateLimitUnset)
	return ks
}

// keyStates is a provider health's set of keys, in the order first seen.
// Each is counted by the provisioned configs that name it: a reload keeps
// the state of the keys the new config still names, and a key no config
// names leaves (the admin view, the metrics).
type keyStates struct {
	mu   sync.Mutex
	list []*keyState
	uses []int // per entry of list: the configs naming it
}

// key returns the state of the key with fingerprint fp, creating it, and
// counts one more config naming it; release undoes it.
func (ks *keyStates) key(fp string) *keyState {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for i, k := range ks.list {
		if k.fp == fp {
			ks.uses[i]++
			return k
		}
	}
	k := newKeyState(fp)
	ks.list = append(ks.list, k)
	ks.uses = append(ks.uses, 1)
	return k
}

// release drops one config's hold on each of keys; a key no config names
// any more is forgotten.
func (ks *keyStates) release(keys []*poolKey) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, pk := range keys {
		for i, k := range ks.list {
			if k != pk.st {
				continue
			}
			if ks.uses[i]--; ks.uses[i] <= 0 {
				ks.list = append(ks.list[:i:i], ks.list[i+1:]...)
				ks.uses = append(ks.uses[:i:i], ks.uses[i+1:]...)
			}
			break
		}
	}
}

func (ks *keyStates) all() []*keyState {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return append([]*keyState(nil), ks.list...)
}

// poolKey is one configured key of a provider.
type poolKey struct {
	secret string
	st     *keyState
}

// left is what the key has left of one limit as far as the proxy knows at
// now (unlimited when unknown or past its reset). The request count is the
// provider's word less the attempts sent since (noteRateLimits, take).
func left(n, reset, now int64) (int64, bool) {
	if n == rateLimitUnset || (reset != 0 && now >= reset) {
		return 0, false
	}
	return max(n, 0), true
}

// verdict is what a key allows now: use it (keyOK), or why not, with when
// it may serve again (zero: not by itself).
func (k *keyState) verdict(now, estimate int64, reserve int64) (state string, until int64) {
	if k.disabled.Load() {
		return keyDisabled, 0
	}
	if c := k.coolUntil.Load(); c > now {
		return keyCooling, c
	}
	if n, ok := left(k.reqLeft.Load(), k.reqReset.Load(), now); ok {
		if afterReserve(n, reserve) < 1 {
			return keyExhausted, k.reqReset.Load()
		}
	}
	if n, ok := left(k.tokLeft.Load(), k.tokReset.Load(), now); ok && estimate > 0 {
		if afterReserve(n, reserve) < estimate {
			return keyExhausted, k.tokReset.Load()
		}
	}
	return keyOK, 0
}

// score ranks usable keys: the most requests left (unknown is most), then
// the most tokens left.
func (k *keyState) score(now int64) (int64, int64) {
	const unknown = 1 << 62
	r, t := int64(unknown), int64(unknown)
	if n, ok := left(k.reqLeft.Load(), k.reqReset.Load(), now); ok {
		r = n
	}
	if n, ok := left(k.tokLeft.Load(), k.tokReset.Load(), now); ok {
		t = n
	}
	return r, t
}

// noteRateLimits records what the response to an attempt says of its
// key's quota; sent is the attempt's place in the order of sends and
// before the attempts awaiting a response when it was sent (take).
//
// The request count is a lower bound of what the key has left once every
// attempt sent so far is counted, so a key is never sent more than its
// quota: each send takes one, and a response that says r left raises it
// to r less every attempt the provider may not have counted yet (those
// still awaiting a response when this one was sent, and those sent since),
// and caps it at r. A new window (another reset) starts over from the
// response. Tokens take the lowest word within a window.
func (k *keyState) noteRateLimits(rl rateLimits, sent, before int64) {
	if rl.reqLeft != rateLimitUnset {
		for {
			// A take between reading sent and the swap changes reqLeft, so
			// the swap fails and the count is made again.
			cur, curAt := k.reqLeft.Load(), k.reqReset.Load()
			lo := max(0, rl.reqLeft-before-(k.sent.Load()-sent))
			if cur != rateLimitUnset && rl.reqReset != 0 && curAt != 0 && absNs(rl.reqReset-curAt) < int64(time.Second) {
				lo = min(max(cur, lo), rl.reqLeft)
			}
			if k.reqLeft.CompareAndSwap(cur, lo) {
				k.reqReset.Store(rl.reqReset)
				break
			}
		}
	}
	noteLimit(&k.tokLeft, &k.tokReset, rl.tokLeft, rl.tokReset)
}

func noteLimit(left, reset *atomic.Int64, n, at int64) {
	if n == rateLimitUnset {
		return
	}
	cur, curAt := left.Load(), reset.Load()
	sameWindow := cur != rateLimitUnset && at != 0 && curAt != 0 && absNs(at-curAt) < int64(time.Second)
	if sameWindow {
		for cur > n && !left.CompareAndSwap(cur, n) {
			cur = left.Load()
		}
		return
	}
	left.Store(n)
	reset.Store(at)
}

// take claims one request of the key's known quota for an attempt about
// to be sent, unless another request took the last one meanwhile (then ok
// is false). It returns the attempt's place in the order of sends and the
// attempts awaiting a response before it; answered (or the attempt's end,
// when no answer came) takes it off those awaiting, and release undoes a
// take whose attempt was not sent after all.
func (k *keyState) take(now, reserve int64) (sent, before int64, ok bool) {
	sent = k.sent.Add(1) // first: a response counting sends sees this one before the take below
	for {
		n, reset := k.reqLeft.Load(), k.reqReset.Load()
		if n == rateLimitUnset || (reset != 0 && now >= reset) {
			break
		}
		if afterReserve(n, reserve) < 1 {
			return 0, 0, false
		}
		if k.reqLeft.CompareAndSwap(n, n-1) {
			break
		}
	}
	return sent, k.awaiting.Add(1) - 1, true
}

// release undoes a take whose attempt was not sent.
func (k *keyState) release(now int64) {
	k.awaiting.Add(-1)
	if _, ok := left(k.reqLeft.Load(), k.reqReset.Load(), now); ok {
		k.reqLeft.Add(1)
	}
}

func (k *keyState) answered() { k.awaiting.Add(-1) }

func absNs(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}

// cool takes the key out until until (a 429).
func (k *keyState) cool(until int64) {
	for {
		cur := k.coolUntil.Load()
		if cur >= until || k.coolUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// state is the key's state for the admin view and the gauge: routing's
// verdict for the smallest request (one token), under the provider's
// reserve. A key shown ok may still be skipped for a request larger than
// its tokens_remaining.
func (k *keyState) state(now int64) string {
	s, _ := k.verdict(now, 1, k.reserve.Load())
	return s
}

// reset re-enables the disabled keys, ends the cooldowns and forgets the
// learned quota (the next response teaches it again); it returns the
// fingerprints of the keys it re-enabled.
func (ks *keyStates) reset() (reenabled []string) {
	for _, k := range ks.all() {
		if k.disabled.Swap(false) {
			reenabled = append(reenabled, k.fp)
		}
		k.coolUntil.Store(0)
		k.forgetQuota()
	}
	return reenabled
}

func (k *keyState) forgetQuota() {
	k.reqLeft.Store(rateLimitUnset)
	k.reqReset.Store(0)
	k.tokLeft.Store(rateLimitUnset)
	k.tokReset.Store(0)
}

// Key states, as in the admin view and the key_state gauge (its value is
// the order here).
const (
	keyOK        = "ok"
	keyCooling   = "cooling"
	keyExhausted = "exhausted"
	keyDisabled  = "disabled"
)
