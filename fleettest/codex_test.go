package fleettest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Codex CLI through the balancer: `codex exec`, then the follow-up turn
// `codex exec resume --last`, each landing where round_robin sends it.
// The binary is the one the root package's real-client tests pin and
// install (clients_test.go): the same npm package, version and cache
// directory, installed here too when missing.

const codexVersion = "0.171.0" // clients_test.go's codexVersion

const codexConfig = `model = "gpt-test"
model_provider = "hedge"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false

[model_providers.hedge]
name = "llm_hedge"
base_url = "%s/v1"
env_key = "HEDGE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`

// codexBinary returns the pinned Codex, installing it into the shared
// cache with npm when missing; it skips the test without npm.
func codexBinary(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache dir: %v", err)
	}
	dir := filepath.Join(cache, "caddy-llm-hedge", "npm-openai-codex-"+codexVersion)
	find := func(prefix string) string {
		m, _ := filepath.Glob(filepath.Join(prefix, "node_modules", "@openai", "codex-*", "vendor", "*", "bin", "codex"))
		if len(m) == 1 {
			return m[0]
		}
		return ""
	}
	if bin := find(dir); bin != "" {
		return bin
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("npm is not in PATH: the Codex test installs @openai/codex@%s with npm", codexVersion)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "npm-openai-codex-"+codexVersion+".tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	out, err := exec.Command(npm, "install", "--prefix", tmp, "--no-save", "--no-audit", "--no-fund", "--no-package-lock",
		"--ignore-scripts", "--include=optional", "--loglevel=error", "@openai/codex@"+codexVersion).CombinedOutput()
	if err != nil {
		t.Fatalf("npm install @openai/codex@%s: %v\n%s", codexVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && find(dir) == "" {
		t.Fatal(err)
	}
	if bin := find(dir); bin != "" {
		return bin
	}
	t.Fatalf("no codex binary under %s", dir)
	return ""
}

// codexThroughBalancer: a first turn and its follow-up through the balancer.
func (f *fleet) codexThroughBalancer(t *testing.T) {
	bin := codexBinary(t)
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), fmt.Appendf(nil, codexConfig, f.balancer.URL()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"CODEX_HOME=" + codexHome, "HEDGE_API_KEY=sk-fleet"}
	run := func(args ...string) string {
		t.Helper()
		last := filepath.Join(home, "last-message.txt")
		_ = os.Remove(last)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"exec"}, args...)...)
		cmd.Dir, cmd.Env, cmd.WaitDelay = home, env, 5*time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("codex exec %v: %v\n--- stdout ---\n%s\n--- stderr ---\n%s", args, err, stdout.String(), stderr.String())
		}
		b, _ := os.ReadFile(last)
		return strings.TrimSpace(string(b))
	}
	before := f.sims["a"].Stats().Requests + f.sims["b"].Stats().Requests
	started := time.Now()
	last := filepath.Join(home, "last-message.txt")
	if got := run("--skip-git-repo-check", "--output-last-message", last, "Say hello."); got != wantText {
		t.Fatalf("codex exec answered %q", got)
	}
	if got := run("resume", "--last", "--skip-git-repo-check", "--output-last-message", last, "Say more."); got != wantText {
		t.Fatalf("codex exec resume --last answered %q", got)
	}
	if n := f.sims["a"].Stats().Requests + f.sims["b"].Stats().Requests - before; n != 2 {
		t.Fatalf("the providers saw %d requests for two Codex turns", n)
	}
	// The follow-up carries the first turn (Codex sends store false and the
	// whole conversation): its body is the larger.
	var turns []sim.RequestRecord
	for _, name := range []string{"a", "b"} {
		for _, rec := range f.sims[name].Requests() {
			if rec.Path == "/v1/responses" && rec.Start.After(started) {
				turns = append(turns, rec)
			}
		}
	}
	slices.SortFunc(turns, func(x, y sim.RequestRecord) int { return x.Start.Compare(y.Start) })
	if len(turns) != 2 || turns[1].BodySize <= turns[0].BodySize || turns[1].Status != 200 {
		t.Fatalf("the two Codex turns at the providers: %+v", turns)
	}
}
