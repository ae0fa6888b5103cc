-- wrk script: POST one AdmissionReview (file given after `--`) on every request, or GET without a file; print a
-- JSON summary.

function init(args)
  if args[1] == nil then
    return
  end
  local file = assert(io.open(args[1], "rb"))
  wrk.method = "POST"
  wrk.body = file:read("*a")
  wrk.headers["Content-Type"] = "application/json"
  file:close()
end

function done(summary, latency, requests)
  local errors = summary.errors
  -- latency(i) is the i-th distinct latency recorded (microseconds, ascending) and how many requests took it.
  local over_1s = 0
  for i = 1, #latency do
    local us, count = latency(i)
    if us > 1000000 then
      over_1s = over_1s + count
    end
  end
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "max_us": %d, "over_1s": %d, ' ..
    '"connect_errors": %d, "read_errors": %d, "write_errors": %d, "status_errors": %d, "timeouts": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max, over_1s,
    errors.connect, errors.read, errors.write, errors.status, errors.timeout))
end
