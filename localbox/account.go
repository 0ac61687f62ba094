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

// accountService is the Account service: every token the local box issued
// is a device of its one account, the owner's.
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
	me := caller(ctx).ID
	var r controlv1.ListDevicesResponse
	for _, t := range x.s.toks.list() {
		r.Devices = append(r.Devices, &controlv1.Device{
			Id:           t.ID,
			Name:         t.Name,
			Client:       t.Client,
			CreatedAtMs:  t.CreatedAtMS,
			LastUsedAtMs: t.LastUsedAtMS,
			Current:      t.ID == me,
		})
	}
	return &r, nil
}

func (x *accountService) RevokeDevice(_ context.Context, req *controlv1.RevokeDeviceRequest) (*controlv1.RevokeDeviceResponse, error) {
	gone, err := x.s.toks.revoke(func(t TokenRecord) bool { return t.ID == req.GetId() })
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

func (x *accountService) SignOutEverywhere(context.Context, *controlv1.SignOutEverywhereRequest) (*controlv1.SignOutEverywhereResponse, error) {
	n, err := x.s.signOutEverywhere()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sign out everywhere: %v", err)
	}
	return &controlv1.SignOutEverywhereResponse{Revoked: uint32(n)}, nil
}

// signOutEverywhere revokes every token, ending every open call, and every
// session of the owner's console.
func (s *Server) signOutEverywhere() (int, error) {
	s.owner.endSessions()
	gone, err := s.toks.revoke(func(TokenRecord) bool { return true })
	if err != nil {
		return 0, err
	}
	s.logf("signed out everywhere: %d tokens revoked", len(gone))
	return len(gone), nil
}
