package local

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is one child process of the topology: Envoy or a Tollgate
// replica.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// start runs cmd in a process group of its own (a terminal's Ctrl-C
// reaches the launcher only, which stops the children in order), its
// output as lines prefixed with name to logs; onLine, when set, sees each
// stdout line. A goroutine waits for the process and closes Exited.
func (p *Process) start(name string, cmd *exec.Cmd, logs io.Writer, onLine func(string)) error {
	if logs == nil {
		logs = io.Discard
	}
	shared := &lockedWriter{w: logs}
	out := &lineWriter{prefix: name + " | ", w: shared, onLine: onLine}
	cmd.Stdout, cmd.Stderr = out, &lineWriter{prefix: name + " | ", w: shared}
	ownProcessGroup(cmd)
	p.cmd, p.exited = cmd, make(chan struct{})
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return nil
}

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is how the process ended (valid once Exited is closed).
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process (nothing once it has exited).
func (p *Process) Signal(sig os.Signal) {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM and waits grace for the process to end, then kills
// it. It reports whether the process ended by itself.
func (p *Process) Stop(grace time.Duration) bool {
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}

// lockedWriter serialises the writes of several processes' output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// maxLine bounds a line held back waiting for its end.
const maxLine = 64 << 10

// lineWriter writes whole lines, each prefixed, and shows each to onLine.
// A line longer than maxLine is written in pieces.
type lineWriter struct {
	prefix string
	w      io.Writer
	onLine func(string)
	buf    []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 && len(l.buf) < maxLine {
			break
		}
		if i < 0 {
			i = len(l.buf) - 1
		}
		line := l.buf[:i+1]
		if l.onLine != nil {
			l.onLine(string(bytes.TrimRight(line, "\n")))
		}
		end := ""
		if line[len(line)-1] != '\n' {
			end = "\n"
		}
		if _, err := fmt.Fprintf(l.w, "%s%s%s", l.prefix, line, end); err != nil {
			return len(b), err
		}
		l.buf = l.buf[i+1:]
	}
	// Keep the partial line in a buffer of its own, not aliasing b.
	l.buf = append([]byte(nil), l.buf...)
	return len(b), nil
}
