// Package probe asks the scheduler what its discovery knows (gRPC ListNodes) and keeps a
// canary moving through it: a watchdog-owned EndpointSlice with one terminating endpoint
// whose node API the watchdog answers itself (docs/design.md, "The discovery probe").
package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

// The only RPC the watchdog ever calls: Schedule would move the scheduler's round-robin.
const listNodesPath = "/scheduler.v1.Scheduler/ListNodes"

// Bounds of one call: 20,000 nodes answer in about 1.5 MB.
const (
	CallTimeout  = 5 * time.Second
	maxListBytes = 8 << 20
)

// Node is one entry of ListNodes: node_id = 1, endpoint = 2.
type Node struct{ ID, Endpoint string }

// StatusError is a gRPC status other than OK: Unavailable from an HA standby ("not
// the leader"), Unimplemented from a scheduler without the method.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	name := map[int]string{12: "Unimplemented", 14: "Unavailable"}[e.Code]
	return fmt.Sprintf("ListNodes answered gRPC status %d %s: %s", e.Code, name, e.Message)
}

// Client calls ListNodes: one unary gRPC call over plaintext HTTP/2 with net/http,
// read with protowire (not grpc-go: docs/performance.md, "The discovery probe's gRPC client").
type Client struct{ http *http.Client }

// NewClient returns a client that speaks HTTP/2 with prior knowledge only.
func NewClient() *Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	t := &http.Transport{Protocols: &p, MaxResponseHeaderBytes: 64 << 10, ResponseHeaderTimeout: CallTimeout,
		DialContext: (&net.Dialer{Timeout: CallTimeout}).DialContext, IdleConnTimeout: time.Minute}
	return &Client{http: httpbound.Client(t, maxListBytes)}
}

// ListNodes asks the scheduler at addr (host:port) for discovery's snapshot.
func (c *Client) ListNodes(ctx context.Context, addr string) ([]Node, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	// An empty ListNodesRequest: no compression, length 0.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, (&url.URL{Scheme: "http", Host: addr, Path: listNodesPath}).String(), bytes.NewReader(make([]byte, 5)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ListNodes on %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body) // to the end: the status is in the trailers
	if err != nil {
		return nil, fmt.Errorf("ListNodes on %s: read answer: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ListNodes on %s: HTTP status %d, not a gRPC server", addr, resp.StatusCode)
	}
	// A status without a message comes in the headers ("trailers-only").
	status, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if status == "" {
		status, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if code, err := strconv.Atoi(status); err != nil || code != 0 {
		if err != nil {
			return nil, fmt.Errorf("ListNodes on %s: no gRPC status in the answer", addr)
		}
		m, _ := url.PathUnescape(msg)
		return nil, fmt.Errorf("on %s: %w", addr, &StatusError{Code: code, Message: m})
	}
	nodes, err := decodeNodes(body)
	if err != nil {
		return nil, fmt.Errorf("ListNodes on %s: %w", addr, err)
	}
	return nodes, nil
}

// decodeNodes reads one length-prefixed, uncompressed ListNodesResponse.
func decodeNodes(frame []byte) ([]Node, error) {
	if len(frame) < 5 || frame[0] != 0 || uint64(binary.BigEndian.Uint32(frame[1:5])) != uint64(len(frame)-5) {
		return nil, errors.New("the answer is not one uncompressed gRPC message")
	}
	var nodes []Node
	err := fields(frame[5:], func(num protowire.Number, v []byte) error {
		if num != 1 { // repeated Node nodes = 1
			return nil
		}
		nodes = append(nodes, Node{})
		n := &nodes[len(nodes)-1]
		return fields(v, func(num protowire.Number, s []byte) error {
			switch num {
			case 1:
				n.ID = string(s)
			case 2:
				n.Endpoint = string(s)
			}
			return nil
		})
	})
	return nodes, err
}

// fields calls each with msg's length-delimited fields, skipping others (a newer scheduler may add some).
func fields(msg []byte, each func(protowire.Number, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeField(msg) // the whole field checked: the reads below cannot fail
		if n < 0 {
			return fmt.Errorf("bad message: %w", protowire.ParseError(n))
		}
		if typ == protowire.BytesType {
			_, _, tag := protowire.ConsumeTag(msg)
			v, _ := protowire.ConsumeBytes(msg[tag:n])
			if err := each(num, v); err != nil {
				return err
			}
		}
		msg = msg[n:]
	}
	return nil
}
