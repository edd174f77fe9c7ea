import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  NotFoundException,
} from '@nestjs/common';
import { type Observable, map } from 'rxjs';

/** Turns a `null` body into a 404. Placed outside the cache interceptor, so the `null` itself is cached. */
@Injectable()
export class NotFoundOnNullInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<{ url: string }>();
    return next.handle().pipe(
      map((body: unknown) => {
        if (body === null || body === undefined)
          throw new NotFoundException(`Nothing at ${request.url}`);
        return body;
      }),
    );
  }
}
