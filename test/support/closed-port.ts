import net from 'node:net'

/** A port on 127.0.0.1 that nothing listens on (just released): connecting to it is refused, as to a killed controller. */
export async function closedPort(): Promise<number> {
  const spare = net.createServer()
  await new Promise<void>((resolve) => spare.listen(0, '127.0.0.1', resolve))
  const port = (spare.address() as net.AddressInfo).port
  await new Promise((resolve) => spare.close(resolve))
  return port
}
