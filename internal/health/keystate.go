package health

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"
)

// keyFingerprint names a key in the admin view, the metrics and the state.
func Fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// keyState is the shared state of one key of one provider: atomics only.
type Key struct {
	Fp        string
	Disabled  atomic.Bool  // 401/403: until an admin reset or a reload
	CoolUntil atomic.Int64 // 429: unix nanos
	InFlight  atomic.Int64
	awaiting  atomic.Int64 // attempts sent with the key, their response not yet in
	sent      atomic.Int64 // attempts sent with the key, ever: their order
	ReqLeft   atomic.Int64 // rateLimitUnset when unknown
	ReqReset  atomic.Int64
	TokLeft   atomic.Int64
	TokReset  atomic.Int64
	// reserve is the quota_reserve of the key's provider, so that the
	// admin view and the gauge judge the key as routing does.
	Reserve atomic.Int64
}

func NewKeyState(fp string) *Key {
	ks := &Key{Fp: fp}
	ks.ReqLeft.Store(RateLimitUnset)
	ks.TokLeft.Store(RateLimitUnset)
	return ks
}

// keyStates is a provider health's set of keys, in the order first seen.
// Each is counted by the provisioned configs that name it: a reload keeps
// the state of the keys the new config still names, and a key no config
// names leaves (the admin view, the metrics).
type Keys struct {
	mu   sync.Mutex
	list []*Key
	uses []int // per entry of list: the configs naming it
}

// key returns the state of the key with fingerprint fp, creating it, and
// counts one more config naming it; release undoes it.
func (ks *Keys) Key(fp string) *Key {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for i, k := range ks.list {
		if k.Fp == fp {
			ks.uses[i]++
			return k
		}
	}
	k := NewKeyState(fp)
	ks.list = append(ks.list, k)
	ks.uses = append(ks.uses, 1)
	return k
}

// release drops one config's hold on each of keys; a key no config names
// any more is forgotten.
func (ks *Keys) Release(keys []*PoolKey) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, pk := range keys {
		for i, k := range ks.list {
			if k != pk.St {
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

func (ks *Keys) All() []*Key {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return append([]*Key(nil), ks.list...)
}

// poolKey is one configured key of a provider.
type PoolKey struct {
	Secret string
	St     *Key
}

// left is what the key has left of one limit as far as the proxy knows at
// now (unlimited when unknown or past its reset). The request count is the
// provider's word less the attempts sent since (noteRateLimits, take).
func Left(n, reset, now int64) (int64, bool) {
	if n == RateLimitUnset || (reset != 0 && now >= reset) {
		return 0, false
	}
	return max(n, 0), true
}

// verdict is what a key allows now: use it (keyOK), or why not, with when
// it may serve again (zero: not by itself).
func (k *Key) Verdict(now, estimate int64, reserve int64) (state string, until int64) {
	if k.Disabled.Load() {
		return KeyDisabled, 0
	}
	if c := k.CoolUntil.Load(); c > now {
		return KeyCooling, c
	}
	if n, ok := Left(k.ReqLeft.Load(), k.ReqReset.Load(), now); ok {
		if afterReserve(n, reserve) < 1 {
			return KeyExhausted, k.ReqReset.Load()
		}
	}
	if n, ok := Left(k.TokLeft.Load(), k.TokReset.Load(), now); ok && estimate > 0 {
		if afterReserve(n, reserve) < estimate {
			return KeyExhausted, k.TokReset.Load()
		}
	}
	return KeyOK, 0
}

// score ranks usable keys: the most requests left (unknown is most), then
// the most tokens left.
func (k *Key) Score(now int64) (int64, int64) {
	const unknown = 1 << 62
	r, t := int64(unknown), int64(unknown)
	if n, ok := Left(k.ReqLeft.Load(), k.ReqReset.Load(), now); ok {
		r = n
	}
	if n, ok := Left(k.TokLeft.Load(), k.TokReset.Load(), now); ok {
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
func (k *Key) NoteRateLimits(rl RateLimits, sent, before int64) {
	if rl.ReqLeft != RateLimitUnset {
		for {
			// A take between reading sent and the swap changes reqLeft, so
			// the swap fails and the count is made again.
			cur, curAt := k.ReqLeft.Load(), k.ReqReset.Load()
			lo := max(0, rl.ReqLeft-before-(k.sent.Load()-sent))
			if cur != RateLimitUnset && rl.ReqReset != 0 && curAt != 0 && absNs(rl.ReqReset-curAt) < int64(time.Second) {
				lo = min(max(cur, lo), rl.ReqLeft)
			}
			if k.ReqLeft.CompareAndSwap(cur, lo) {
				k.ReqReset.Store(rl.ReqReset)
				break
			}
		}
	}
	noteLimit(&k.TokLeft, &k.TokReset, rl.TokLeft, rl.TokReset)
}

func noteLimit(left, reset *atomic.Int64, n, at int64) {
	if n == RateLimitUnset {
		return
	}
	cur, curAt := left.Load(), reset.Load()
	sameWindow := cur != RateLimitUnset && at != 0 && curAt != 0 && absNs(at-curAt) < int64(time.Second)
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
func (k *Key) Take(now, reserve int64) (sent, before int64, ok bool) {
	sent = k.sent.Add(1) // first: a response counting sends sees this one before the take below
	for {
		n, reset := k.ReqLeft.Load(), k.ReqReset.Load()
		if n == RateLimitUnset || (reset != 0 && now >= reset) {
			break
		}
		if afterReserve(n, reserve) < 1 {
			return 0, 0, false
		}
		if k.ReqLeft.CompareAndSwap(n, n-1) {
			break
		}
	}
	return sent, k.awaiting.Add(1) - 1, true
}

// release undoes a take whose attempt was not sent.
func (k *Key) Release(now int64) {
	k.awaiting.Add(-1)
	if _, ok := Left(k.ReqLeft.Load(), k.ReqReset.Load(), now); ok {
		k.ReqLeft.Add(1)
	}
}

func (k *Key) Answered() { k.awaiting.Add(-1) }

func absNs(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}

// cool takes the key out until until (a 429).
func (k *Key) Cool(until int64) {
	for {
		cur := k.CoolUntil.Load()
		if cur >= until || k.CoolUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// state is the key's state for the admin view and the gauge: routing's
// verdict for the smallest request (one token), under the provider's
// reserve. A key shown ok may still be skipped for a request larger than
// its tokens_remaining.
func (k *Key) State(now int64) string {
	s, _ := k.Verdict(now, 1, k.Reserve.Load())
	return s
}

// reset re-enables the disabled keys, ends the cooldowns and forgets the
// learned quota (the next response teaches it again); it returns the
// fingerprints of the keys it re-enabled.
func (ks *Keys) Reset() (reenabled []string) {
	for _, k := range ks.All() {
		if k.Disabled.Swap(false) {
			reenabled = append(reenabled, k.Fp)
		}
		k.CoolUntil.Store(0)
		k.ForgetQuota()
	}
	return reenabled
}

func (k *Key) ForgetQuota() {
	k.ReqLeft.Store(RateLimitUnset)
	k.ReqReset.Store(0)
	k.TokLeft.Store(RateLimitUnset)
	k.TokReset.Store(0)
}

// Key states, as in the admin view and the key_state gauge (its value is
// the order here).
const (
	KeyOK        = "ok"
	KeyCooling   = "cooling"
	KeyExhausted = "exhausted"
	KeyDisabled  = "disabled"
)
