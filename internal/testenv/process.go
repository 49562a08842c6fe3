package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"time"
)

// Process is a test server binary (Alertmanager, Pushgateway) listening on
// 127.0.0.1.
type Process struct {
	// URL is http://127.0.0.1:<port>.
	URL    string
	cmd    *exec.Cmd
	out    *SyncBuffer
	exited chan struct{}
	once   sync.Once
}

// StartProcess runs bin with the arguments args gives for a listen address, and
// waits until GET readyPath answers 200. A free port can be taken between choosing
// it and the binary's bind: it tries three ports.
func StartProcess(bin string, args func(addr string) []string, readyPath string) (*Process, error) {
	var lastOut string
	for attempt := 0; attempt < 3; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addr := ln.Addr().String()
		ln.Close()
		p := &Process{URL: "http://" + addr, out: &SyncBuffer{}, exited: make(chan struct{})}
		p.cmd = exec.Command(bin, args(addr)...)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = p.cmd.Wait(); close(p.exited) }()
		if p.waitReady(readyPath) {
			return p, nil
		}
		lastOut = p.out.String()
		p.Stop()
	}
	return nil, fmt.Errorf("%s did not start:\n%s", bin, lastOut)
}

// waitReady polls readyPath until the process answers or exits (a readiness wait,
// not a timed assertion: the bound only stops a hung start from hanging the test).
func (p *Process) waitReady(readyPath string) bool {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return false
		default:
		}
		resp, err := http.Get(p.URL + readyPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// Stop kills the process and waits for it (idempotent).
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// Output is what the process wrote.
func (p *Process) Output() string { return p.out.String() }

// SyncBuffer is a bytes.Buffer safe for a process's output and a test reading it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *SyncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *SyncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// get is a GET that fails unless the reply is 200 OK; the caller closes the body.
func get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp, nil
}
