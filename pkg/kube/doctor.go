package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/version"
)

// The calls of `watchdog doctor` only.

// CreateSelfSubjectAccessReview asks whether the client's own identity may make one call.
func (c *Client) CreateSelfSubjectAccessReview(ctx context.Context, r *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
	return into[authorizationv1.SelfSubjectAccessReview](ctx, c.authz.Post().Resource("selfsubjectaccessreviews").Body(r))
}

// ServerVersion reads /version and the Date header, the API server's clock (to the
// second), through the REST client's HTTP client (the REST client hides headers).
func (c *Client) ServerVersion(ctx context.Context) (*version.Info, time.Time, error) {
	u := c.core.Get().AbsPath("/version").URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.core.Client.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("GET %s answered %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("GET %s: read body: %w", u, err)
	}
	info := &version.Info{}
	if err := json.Unmarshal(body, info); err != nil {
		return nil, time.Time{}, fmt.Errorf("GET %s: not a version document: %w", u, err)
	}
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return info, time.Time{}, fmt.Errorf("GET %s: no usable Date header (%q)", u, resp.Header.Get("Date"))
	}
	return info, date, nil
}
