package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsHost is a test host of our own: a network namespace joined to this one by a
// veth pair, on addresses of the benchmarking range 198.18.0.0/15 (RFC 2544, never
// routed). The API server refuses to proxy to loopback ("address not allowed"), so
// a stand-in scheduler that the pod proxy must reach listens here, on PeerIP. All
// traffic stays on this machine. Needs root (CAP_NET_ADMIN) and iproute2's ip.
type NetnsHost struct {
	Name   string // the namespace, under /run/netns
	HostIP string // this namespace's end of the veth pair
	PeerIP string // the test host's address
	link   string
}

// NewNetnsHost creates the namespace and the veth pair; Close removes both. The
// /30 is chosen from the process ID so that concurrent test processes do not collide.
func NewNetnsHost() (*NetnsHost, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("a network-namespace test host needs iproute2's ip: %w", err)
	}
	id := os.Getpid() % 16000
	base := 4 * id // 16000 /30s fit in 198.18.0.0/15
	h := &NetnsHost{
		Name:   fmt.Sprintf("watchdog-test-%d", os.Getpid()),
		HostIP: fmt.Sprintf("198.%d.%d.%d", 18+base>>16, base>>8&0xff, base&0xff+1),
		PeerIP: fmt.Sprintf("198.%d.%d.%d", 18+base>>16, base>>8&0xff, base&0xff+2),
		link:   fmt.Sprintf("wdt%d", os.Getpid()),
	}
	peer := h.link + "p"
	steps := [][]string{
		{"netns", "add", h.Name},
		{"link", "add", h.link, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.Name},
		{"addr", "add", h.HostIP + "/30", "dev", h.link},
		{"link", "set", h.link, "up"},
		{"-n", h.Name, "addr", "add", h.PeerIP + "/30", "dev", peer},
		{"-n", h.Name, "link", "set", peer, "up"},
		{"-n", h.Name, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("ip %s: %w: %s (a network-namespace test host needs root or CAP_NET_ADMIN)", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return h, nil
}

// Listen opens a TCP listener inside the namespace on PeerIP and a free port.
func (h *NetnsHost) Listen() (net.Listener, error) { return h.ListenPort(0) }

// ListenPort opens a TCP listener inside the namespace on PeerIP and port. The
// socket belongs to the namespace it was created in; the thread that created it
// returns to ours (or, if it cannot, dies with its goroutine, as LockOSThread
// without Unlock makes it).
func (h *NetnsHost) ListenPort(port int) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ours, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- result{err: err}
			return // the thread never left: still ours, but stays locked and exits
		}
		defer ours.Close()
		theirs, err := os.Open("/run/netns/" + h.Name)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer theirs.Close()
		if err := unix.Setns(int(theirs.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter network namespace %s: %w", h.Name, err)}
			return
		}
		l, lerr := net.Listen("tcp", net.JoinHostPort(h.PeerIP, strconv.Itoa(port)))
		if err := unix.Setns(int(ours.Fd()), unix.CLONE_NEWNET); err != nil {
			if l != nil {
				_ = l.Close()
			}
			done <- result{err: fmt.Errorf("return from network namespace %s: %w", h.Name, err)}
			return // locked: the runtime ends this thread with the goroutine
		}
		runtime.UnlockOSThread()
		done <- result{l: l, err: lerr}
	}()
	r := <-done
	return r.l, r.err
}

// Close deletes the namespace, which takes the veth pair with it.
func (h *NetnsHost) Close() error {
	var errs []error
	if out, err := exec.Command("ip", "netns", "del", h.Name).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
		errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", h.Name, err, out))
	}
	// The pair goes with the namespace; a half-made one (the namespace step failed
	// after the link was added) is removed here.
	_ = exec.Command("ip", "link", "del", h.link).Run()
	return errors.Join(errs...)
}
