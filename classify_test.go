package llmhedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

func TestClassifyStatus(t *testing.T) {
	cases := []struct {
		status    int
		class     failClass
		provider  bool // counts toward cooldown and fails over
		transient bool // worth a same-provider retry
	}{
		{400, classRequest, false, false},
		{401, classAuth, true, false},
		{403, classAuth, true, false},
		{404, classModelNotFound, true, false},
		{408, classStatus5xx, true, true},
		{413, classRequest, false, false},
		{422, classRequest, false, false},
		{429, classRateLimited, true, true},
		{500, classStatus5xx, true, true},
		{502, classStatus5xx, true, true},
		{503, classOverloaded, true, true},
		{504, classStatus5xx, true, true},
		{529, classOverloaded, true, true},
		{302, classMalformed, true, false},
	}
	for _, c := range cases {
		got := classifyStatus(c.status)
		if got != c.class || got.providerLevel() != c.provider || got.transient() != c.transient {
			t.Errorf("%d: %s provider=%v transient=%v; want %s %v %v",
				c.status, got, got.providerLevel(), got.transient(), c.class, c.provider, c.transient)
		}
	}
	for _, c := range []failClass{classClientAbort, classTotalTimeout, classLoser, classRequest} {
		if c.providerLevel() {
			t.Errorf("%s must never count against a provider", c)
		}
	}
}

func TestClassifyTransportError(t *testing.T) {
	bg := context.Background()
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(bg)
		cancel(cause)
		return ctx
	}
	gone, cancel := context.WithCancel(bg)
	cancel()
	cases := []struct {
		name       string
		err        error
		attemptCtx context.Context
		clientCtx  context.Context
		want       failClass
	}{
		{"client gone wins", errors.New("x"), cancelled(errHedgeLost), gone, classClientAbort},
		{"hedge loser", context.Canceled, cancelled(errHedgeLost), bg, classLoser},
		{"first byte timeout", context.Canceled, cancelled(errFirstByteTimeout), bg, classFirstByteTimeout},
		{"response timeout", context.Canceled, cancelled(errResponseTimeout), bg, classResponseTimeout},
		{"total timeout", context.Canceled, cancelled(errTotalTimeout), bg, classTotalTimeout},
		{"dns", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, bg, bg, classConnect},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), bg, bg, classConnect},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), bg, bg, classReset},
		{"eof before headers", io.EOF, bg, bg, classReset},
		{"dial op", &net.OpError{Op: "dial", Err: errors.New("timeout")}, bg, bg, classConnect},
	}
	for _, c := range cases {
		if got := classifyTransportError(c.err, c.attemptCtx, c.clientCtx); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
