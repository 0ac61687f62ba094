package box

import (
	"context"

	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// Device is one signed-in device of the caller's account (account.proto
// Device).
type Device struct {
	// ID is "dev_" + 16 hex digits.
	ID string
	// Name is the device name given at sign-in, at most 64 bytes.
	Name string
	// Client names the client that signed in, such as "cocoonbox-cli".
	Client      string
	CreatedAtMS int64
	// LastUsedAtMS is kept to the minute; 0 means never.
	LastUsedAtMS int64
	// Current is true for the device whose token made the call.
	Current bool
}

// ListDevices returns the devices of the caller's account.
func (c *Client) ListDevices(ctx context.Context) ([]Device, error) {
	r, err := c.account.ListDevices(ctx, &controlv1.ListDevicesRequest{})
	if err != nil {
		return nil, c.wrap("list devices", err)
	}
	var out []Device
	for _, d := range r.GetDevices() {
		out = append(out, Device{
			ID:           d.GetId(),
			Name:         d.GetName(),
			Client:       d.GetClient(),
			CreatedAtMS:  d.GetCreatedAtMs(),
			LastUsedAtMS: d.GetLastUsedAtMs(),
			Current:      d.GetCurrent(),
		})
	}
	return out, nil
}

// RevokeDevice revokes device id; its open calls end. An unknown id is
// ErrNotFound.
func (c *Client) RevokeDevice(ctx context.Context, id string) error {
	if _, err := c.account.RevokeDevice(ctx, &controlv1.RevokeDeviceRequest{Id: id}); err != nil {
		return c.wrap("revoke device "+id, err)
	}
	return nil
}

// SignOutEverywhere revokes every token of the caller's account, its own
// included, and returns how many were revoked.
func (c *Client) SignOutEverywhere(ctx context.Context) (int, error) {
	r, err := c.account.SignOutEverywhere(ctx, &controlv1.SignOutEverywhereRequest{})
	if err != nil {
		return 0, c.wrap("sign out everywhere", err)
	}
	return int(r.GetRevoked()), nil
}
