package memory

import "context"

// Message returns one of the caller's messages by id, whichever session
// holds it, so a client that only kept an id can find its session.
// ENOTFOUND if it does not exist or belongs to another tenant: the two are
// not told apart, so ids of other tenants cannot be probed.
func (s *Service) Message(ctx context.Context, id string) (*Message, error) {
	if id == "" {
		return nil, Errorf(EINVALID, "message id is empty")
	}
	msgs, err := s.Store.MessagesByID(ctx, TenantFromContext(ctx), []string{id}, false)
	if err != nil {
		return nil, err
	}
	if len(s.unexpired(msgs)) == 0 {
		return nil, Errorf(ENOTFOUND, "message %q does not exist", id)
	}
	return msgs[0], nil
}
