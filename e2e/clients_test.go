package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real coding agents, pinned: the real-client tests (TestClaudeCode*,
// TestCodex*) run these exact builds, so a new CLI release cannot change what
// they assert. Bump both here after checking `npm view <pkg> version`.
const (
	claudeCodeVersion = "2.1.332"
	codexVersion      = "0.171.0"
)

// cliRunTimeout bounds one run of a CLI: a client that hangs (on a prompt, on
// a blocked network) fails its test instead of the whole suite.
const cliRunTimeout = 60 * time.Second

// npmCLI is a CLI published on npm whose package ships its native binary in
// a platform package (an optional dependency that npm installs for this OS
// and CPU only).
type npmCLI struct {
	pkg     string
	version string
	// native is the glob of the native binary, relative to node_modules, that
	// matches only the platform package npm picked.
	native string

	once sync.Once
	path string
	err  error
}

var (
	claudeCodeCLI = &npmCLI{
		pkg:     "@anthropic-ai/claude-code",
		version: claudeCodeVersion,
		native:  "@anthropic-ai/claude-code-*/claude" + exeSuffix(),
	}
	codexCLI = &npmCLI{
		pkg:     "@openai/codex",
		version: codexVersion,
		native:  "@openai/codex-*/vendor/*/bin/codex" + exeSuffix(),
	}
)

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

// binary returns the path of the CLI's native binary, installing the pinned
// version into the user cache on first use: once per machine, reused by
// later runs. It skips the test when npm is not installed.
func (c *npmCLI) binary(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("npm is not in PATH: the real-client tests install %s@%s with npm; install Node.js/npm to run them", c.pkg, c.version)
	}
	c.once.Do(func() { c.path, c.err = c.install(npm) })
	if c.err != nil {
		t.Fatalf("installing %s@%s: %v", c.pkg, c.version, c.err)
	}
	return c.path
}

// install puts the package into <user cache>/caddy-llm-hedge/npm-<pkg>-<version>
// unless it is there already. npm installs into a fresh sibling directory
// that is then renamed into place, so concurrent test processes never see a
// half-installed copy; the loser of a rename race uses the winner's copy.
func (c *npmCLI) install(npm string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache dir: %w", err)
	}
	base := filepath.Join(cache, "caddy-llm-hedge")
	name := "npm-" + strings.NewReplacer("@", "", "/", "-").Replace(c.pkg) + "-" + c.version
	dir := filepath.Join(base, name)
	if bin, err := c.find(dir); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, name+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed

	// --ignore-scripts: the packages' postinstall only copies the native
	// binary over a stub, which find does not need. --include=optional: the
	// native binary is in an optional dependency, which a user's npm config
	// may omit.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp,
		"--no-save", "--no-audit", "--no-fund", "--no-package-lock", "--ignore-scripts",
		"--include=optional", "--loglevel=error", c.pkg+"@"+c.version)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out.String())
	}
	if _, err := c.find(tmp); err != nil {
		return "", fmt.Errorf("%w\nnpm output:\n%s", err, out.String())
	}
	if err := os.Rename(tmp, dir); err != nil {
		if bin, ferr := c.find(dir); ferr == nil {
			return bin, nil // another process installed it first
		}
		return "", err
	}
	return c.find(dir)
}

// find returns the native binary under an install prefix, checking that it
// runs and is the pinned version.
func (c *npmCLI) find(prefix string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(prefix, "node_modules", filepath.FromSlash(c.native)))
	if len(matches) != 1 {
		return "", fmt.Errorf("%s: want one native binary matching %s under %s, found %v (did npm skip the optional platform package for %s/%s?)",
			c.pkg, c.native, prefix, matches, runtime.GOOS, runtime.GOARCH)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, matches[0], "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), c.version) {
		return "", fmt.Errorf("%s --version: %v: %q, want %s", matches[0], err, out, c.version)
	}
	return matches[0], nil
}

// cliResult is one finished run of a CLI.
type cliResult struct {
	Stdout, Stderr string
	Exit           int // -1 if it did not exit by itself
	Took           time.Duration
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d after %v\n--- stdout ---\n%s\n--- stderr ---\n%s", r.Exit, r.Took.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// runCLI runs bin with args in dir, with exactly env (plus a few variables
// every run gets) and no stdin, bounded by cliRunTimeout. It fails the test
// only if the CLI could not be started or timed out; the caller judges the
// exit status.
func runCLI(t *testing.T, dir, bin string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(cliBaseEnv(), env...)
	cmd.WaitDelay = 5 * time.Second // the CLI's children may hold the pipes
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := cliResult{Stdout: stdout.String(), Stderr: stderr.String(), Exit: cmd.ProcessState.ExitCode(), Took: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %v\n%s", filepath.Base(bin), cliRunTimeout, res)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running %s: %v\n%s", bin, err, res)
	}
	return res
}

// cliBaseEnv is the environment every CLI run starts from: not the test's
// own, so no real provider key, proxy setting or user config of whoever
// runs the tests reaches the CLI. Loopback is never proxied.
func cliBaseEnv() []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
	}
	if runtime.GOOS == "windows" {
		for _, k := range []string{"SystemRoot", "TEMP", "TMP"} {
			env = append(env, k+"="+os.Getenv(k))
		}
	}
	return env
}

// cliHome makes a fresh home directory for one CLI run and returns the
// variables that point the CLI at it.
func cliHome(t *testing.T) (home string, env []string) {
	t.Helper()
	home = t.TempDir()
	return home, []string{
		"HOME=" + home,
		"USERPROFILE=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
	}
}
