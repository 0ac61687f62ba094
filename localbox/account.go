package localbox

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// accountService is the Account service, within the caller's account:
// each token belongs to one (accounts.go), and only the owner may revoke
// another account's device.
type accountService struct {
	controlv1.UnimplementedAccountServer
	s *Server
}

func caller(ctx context.Context) TokenRecord {
	r, _ := ctx.Value(tokenKey{}).(TokenRecord)
	return r
}

func sortRecords(rs []TokenRecord) {
	slices.SortFunc(rs, func(a, b TokenRecord) int {
		if c := cmp.Compare(a.CreatedAtMS, b.CreatedAtMS); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func (x *accountService) ListDevices(ctx context.Context, _ *controlv1.ListDevicesRequest) (*controlv1.ListDevicesResponse, error) {
	me := caller(ctx)
	var r controlv1.ListDevicesResponse
	for _, t := range x.s.toks.list() {
		if t.Account != me.Account {
			continue
		}
		r.Devices = append(r.Devices, &controlv1.Device{
			Id:           t.ID,
			Name:         t.Name,
			Client:       t.Client,
			CreatedAtMs:  t.CreatedAtMS,
			LastUsedAtMs: t.LastUsedAtMS,
			Current:      t.ID == me.ID,
		})
	}
	return &r, nil
}

func (x *accountService) RevokeDevice(ctx context.Context, req *controlv1.RevokeDeviceRequest) (*controlv1.RevokeDeviceResponse, error) {
	gone, err := x.s.revokeDevice(caller(ctx).Account, req.GetId())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "revoke: %v", err)
	}
	if len(gone) == 0 {
		return nil, status.Errorf(codes.NotFound, "no device %q; list them with `cocoonbox devices`", req.GetId())
	}
	x.s.logf("device %s revoked", req.GetId())
	return &controlv1.RevokeDeviceResponse{}, nil
}

func (x *accountService) RevokeToken(ctx context.Context, _ *controlv1.RevokeTokenRequest) (*controlv1.RevokeTokenResponse, error) {
	me := caller(ctx).ID
	if _, err := x.s.toks.revoke(func(t TokenRecord) bool { return t.ID == me }); err != nil {
		return nil, status.Errorf(codes.Internal, "revoke: %v", err)
	}
	x.s.logf("token %s revoked by its holder", me)
	return &controlv1.RevokeTokenResponse{}, nil
}

func (x *accountService) SignOutEverywhere(ctx context.Context, _ *controlv1.SignOutEverywhereRequest) (*controlv1.SignOutEverywhereResponse, error) {
	n, err := x.s.signOutEverywhere(caller(ctx).Account)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sign out everywhere: %v", err)
	}
	return &controlv1.SignOutEverywhereResponse{Revoked: uint32(n)}, nil
}

// revokeDevice revokes device id for a caller of account: a device of
// the caller's account, or of any account when the caller is the owner's
// ("").
func (s *Server) revokeDevice(account, id string) ([]TokenRecord, error) {
	return s.toks.revoke(func(t TokenRecord) bool { return t.ID == id && (account == "" || t.Account == account) })
}

// signOutEverywhere revokes every token of account ("" for the owner's),
// ending every open call on them, and every console session of it.
func (s *Server) signOutEverywhere(account string) (int, error) {
	s.owner.endSessionsOf(account)
	gone, err := s.toks.revoke(func(t TokenRecord) bool { return t.Account == account })
	if err != nil {
		return 0, err
	}
	s.logf("%s signed out everywhere: %d tokens revoked", accountLabel(account), len(gone))
	return len(gone), nil
}
