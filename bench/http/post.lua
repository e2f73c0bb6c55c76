-- wrk script: POST the body in $WRK_BODY with the content type in $WRK_CTYPE
-- and, for binary OIP bodies, Inference-Header-Content-Length from $WRK_IHCL.
local f = assert(io.open(os.getenv("WRK_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = os.getenv("WRK_CTYPE")
local ihcl = os.getenv("WRK_IHCL")
if ihcl and ihcl ~= "" then
  wrk.headers["Inference-Header-Content-Length"] = ihcl
end
